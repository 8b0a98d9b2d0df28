"""The servers' supervisor: a process in a session of its own with its pid noted beside its start time (a reused
pid is not taken for it), asked over HTTP until it answers, and stopped as a group -- TERM, then KILL at the
deadline -- each end noted."""
from __future__ import annotations

import contextlib
import http.server
import os
import sys
import threading
from pathlib import Path

import pytest

from servers import processes

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(600)"


def test_a_pid_is_taken_only_while_its_process_is_the_one_noted(tmp_path: Path) -> None:
    pid = processes.start("sleeper", ["sleep", "600"], tmp_path, tmp_path)
    pid_file = tmp_path / "sleeper.pid"
    assert processes.live_pid(pid_file) == pid
    pid_file.write_text(f"{pid} 1\n")  # the same pid, another start time: a process after a reboot
    assert processes.live_pid(pid_file) is None
    pid_file.write_text(f"{pid}\n")  # a bare pid of an earlier version: only a process of this checkout's programs
    assert processes.live_pid(pid_file) is None
    processes.write_pid_file(pid, pid_file)
    processes.stop_groups(10, [pid_file], tmp_path / "stop.log")
    assert not processes.running(pid) and not pid_file.exists()
    assert (tmp_path / "stop.log").read_text().split()[1:3] == ["sleeper:", "stopped"]


def test_a_group_that_ignores_term_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pid = processes.start("stubborn", [sys.executable, "-c", IGNORES_TERM], tmp_path, tmp_path)
    processes.wait_until(lambda: "ready" in (tmp_path / "stubborn.log").read_text(), 30)
    processes.stop_groups(1, [tmp_path / "stubborn.pid"], tmp_path / "stop.log")
    assert processes.wait_until(lambda: ended(pid), 10)
    assert "stubborn: killed after 1 s" in (tmp_path / "stop.log").read_text()


def test_a_server_is_waited_for_until_it_answers_and_one_that_ended_is_one_line(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    processes.start("alive", ["sleep", "600"], tmp_path, tmp_path)
    try:  # any answer counts (this one is 501: a server that wants credentials answers too)
        processes.wait_http("alive", f"http://127.0.0.1:{server.server_port}/", tmp_path / "alive.pid",
                            tmp_path / "alive.log")
    finally:
        server.shutdown()
        processes.stop_groups(10, [tmp_path / "alive.pid"], tmp_path / "stop.log")
    processes.start("gone", ["true"], tmp_path, tmp_path)
    with pytest.raises(processes.ServerFailed, match=rf"^the gone server exited; see {tmp_path}/gone.log$"):
        processes.wait_http("gone", f"http://127.0.0.1:{server.server_port}/", tmp_path / "gone.pid",
                            tmp_path / "gone.log")
    # one that said why: its error is in the line (not what a web server adds after it), its log named
    crash = ("import traceback\ntry:\n    raise OSError(98, 'Address already in use')\nexcept OSError:\n"
             "    traceback.print_exc()\nprint('ERROR:    Application startup failed. Exiting.')")
    processes.start("crashed", [sys.executable, "-c", crash], tmp_path, tmp_path)
    with pytest.raises(processes.ServerFailed, match=rf"^the crashed server exited: OSError: \[Errno 98\] Address "
                                                     rf"already in use; see {tmp_path}/crashed.log$"):
        processes.wait_http("crashed", f"http://127.0.0.1:{server.server_port}/", tmp_path / "crashed.pid",
                            tmp_path / "crashed.log")


def test_a_pid_file_of_another_boot_is_not_taken_for_the_process_with_that_pid_and_start_time(tmp_path: Path) -> None:
    """After a reboot a pid and its start time (ticks since the boot) can come again: the boot id tells them apart."""
    pid = processes.start("sleeper", ["sleep", "600"], tmp_path, tmp_path)
    pid_file = tmp_path / "sleeper.pid"
    try:
        pid_noted, started, boot = pid_file.read_text().split()
        assert (int(pid_noted), boot) == (pid, Path("/proc/sys/kernel/random/boot_id").read_text().strip())
        pid_file.write_text(f"{pid} {started} 00000000-0000-0000-0000-000000000000\n")  # before a reboot
        assert processes.live_pid(pid_file) is None
        processes.stop_groups(10, [pid_file], tmp_path / "stop.log")
        assert processes.running(pid) and not pid_file.exists()  # only the file is removed: the process is not ours
    finally:
        processes.send(9, pid)
        processes.wait_until(lambda: ended(pid), 10)


def test_a_group_whose_leader_has_exited_is_still_stopped(tmp_path: Path) -> None:
    leader = processes.start("orphans", ["sh", "-c", "sleep 600 & echo $! > member; exit 0"], tmp_path, tmp_path,
                             cwd=tmp_path)
    assert processes.wait_until(lambda: (tmp_path / "member").exists() and bool((tmp_path / "member").read_text()),
                                10)
    member = int((tmp_path / "member").read_text())
    try:
        assert processes.wait_until(lambda: ended(leader), 10)
        assert processes.running(member)
        processes.stop_groups(10, [tmp_path / "orphans.pid"], tmp_path / "stop.log")
        assert processes.wait_until(lambda: not processes.running(member), 10)
        assert "orphans: stopped" in (tmp_path / "stop.log").read_text()
    finally:
        with contextlib.suppress(OSError):
            os.kill(member, 9)


def ended(pid: int) -> bool:
    """Whether a process started here has ended (and been reaped)."""
    processes.reap()
    return not processes.running(pid)


def test_a_link_in_the_place_of_a_log_or_a_pid_file_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("kept\n")
    for planted in ("linked.log", "linked.pid"):
        folder = tmp_path / planted.replace(".", "-")
        folder.mkdir()
        (folder / planted).symlink_to(outside)
        with pytest.raises(processes.ServerFailed, match=rf"^{folder}/{planted} is a link: refused"):
            processes.start("linked", ["touch", str(folder / "started")], folder, folder)
        assert outside.read_text() == "kept\n" and not (folder / "started").exists()  # nothing started
