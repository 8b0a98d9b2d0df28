"""The servers' supervisor: a process in a session of its own with its pid noted beside its start time (a reused
pid is not taken for it), asked over HTTP until it answers, and stopped as a group -- TERM, then KILL at the
deadline -- each end noted."""
from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

import pytest

from flows.servers import processes

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(600)"


def test_a_pid_is_taken_only_while_its_process_is_the_one_noted(tmp_path: Path) -> None:
    pid = processes.start("sleeper", ["sleep", "600"], tmp_path, tmp_path)
    pid_file = tmp_path / "sleeper.pid"
    assert processes.noted_pid(pid_file) == pid
    pid_file.write_text(f"{pid} 1\n")  # the same pid, another start time: a process after a reboot
    assert processes.noted_pid(pid_file) is None
    pid_file.write_text(f"{pid}\n")  # a bare pid of an earlier version: only a process of this checkout's programs
    assert processes.noted_pid(pid_file) is None
    processes.note_pid(pid, pid_file)
    processes.stop_groups(10, [pid_file], tmp_path / "stop.log")
    assert not processes.running(pid) and not pid_file.exists()
    assert (tmp_path / "stop.log").read_text().split()[1:3] == ["sleeper:", "stopped"]


def test_a_group_that_ignores_term_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pid = processes.start("stubborn", [sys.executable, "-c", IGNORES_TERM], tmp_path, tmp_path)
    processes.wait_until(lambda: "ready" in (tmp_path / "stubborn.log").read_text(), 30)
    processes.stop_groups(1, [tmp_path / "stubborn.pid"], tmp_path / "stop.log")
    assert processes.wait_until(lambda: processes.reap() or not processes.running(pid), 10)
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
