"""Server processes, supervised: each started in a session (process group) of its own with its log and a pid file
that notes its start time and the boot (no later process with that pid, in this boot or another, is taken for it),
asked over HTTP until it answers, watched, and stopped as a group -- TERM, then KILL of what is left at a deadline,
each end noted in a log; a group whose leader has exited is stopped too."""
from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Mapping

from tasks.errors import ERROR_LINE

ENVIRONMENT = Path(sys.prefix)  # the Python environment ringflow runs in: a checkout's .venv, or where it is installed
BIN = Path(sys.executable).parent  # its programs (prefect, mlflow, python)
SECOND_SIGNAL_AFTER = {"worker": 3.0}  # Prefect's worker once a flow run has been: its first TERM makes a cancel
# that a task swallows, its second is Prefect's own SIGKILL of the worker process alone (its flow runs, in its
# group, keep the rest of the time to end)


class ServerFailed(RuntimeError):
    """A server did not start, or ended: one line naming it and its log."""


def refused(path: Path, error: OSError) -> ServerFailed:
    """The one line for a path that is a link (or no folder where one is due): refused, nothing done to it."""
    what = "a link" if os.path.islink(path) else f"not a folder ({error.strerror})"
    return ServerFailed(f"{path} is {what}: refused (root follows no link in the services' folders); remove it")


def open_file(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open of path with O_NOFOLLOW: a link there is refused in one line."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as error:
        if os.path.islink(path):
            raise refused(path, error) from None
        raise


def why_ended(log: Path) -> str:
    """The line of a server's log that says why it ended: its last error line, else its last line ('' for none)."""
    try:
        descriptor = open_file(log, os.O_RDONLY)
    except OSError:
        return ""
    with os.fdopen(descriptor, "rb") as opened:
        opened.seek(max(0, os.fstat(descriptor).st_size - 65536))
        lines = [line.strip() for line in opened.read().decode(errors="replace").splitlines() if line.strip()]
    return next((line for line in reversed(lines) if ERROR_LINE.match(line)), lines[-1] if lines else "")[:500]


def ended(name: str, log: Path) -> ServerFailed:
    """The one line for a server that ended: its name, what its log says last of why, the log's path."""
    why = why_ended(log)
    return ServerFailed(f"the {name} exited{f': {why}' if why else ''}; see {log}")


class Stop(Exception):
    """A signal to stop everything: Ctrl-C (exit 130) or a TERM (make services-down, exit 0)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def stop_on_signals() -> None:
    """Ctrl-C and TERM raise Stop in the main thread. Installed even where SIGINT was ignored when this process
    started (a CI runner, make in a background job), and before any server starts: a server does not inherit an
    ignored SIGINT."""
    def raise_stop(signum: int, frame: object) -> None:
        raise Stop(130 if signum == signal.SIGINT else 0)
    signal.signal(signal.SIGINT, raise_stop)
    signal.signal(signal.SIGTERM, raise_stop)


def ignore_signals() -> None:
    """While stopping: a second Ctrl-C does not cut the stop short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


STARTED: dict[int, subprocess.Popen] = {}  # the processes this one started: reaped as they end


def reap() -> None:
    """Collect the exit of every process started here that has ended (a zombie still counts in its group)."""
    for pid, process in list(STARTED.items()):
        if process.poll() is not None:
            del STARTED[pid]


def process_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state first), None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot), None when there is none."""
    fields = process_fields(pid)
    return fields[19] if fields else None


def boot_id() -> str:
    """This boot's id: start times count from the boot, so a start time is the process's only with it."""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def write_pid_file(pid: int, pid_file: Path, descriptor: int | None = None) -> None:
    """The pid, its start time and the boot in pid_file (or the descriptor opened for it, which it closes)."""
    if descriptor is None:
        descriptor = open_file(pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(descriptor, "w") as file:
        file.write(f"{pid} {start_time(pid) or ''} {boot_id()}\n")


def read_pid_file(pid_file: Path) -> tuple[int, list[str]] | None:
    """The pid a pid file names and what it notes besides (start time, boot id), None without a pid."""
    try:
        words = pid_file.read_text().split()
    except OSError:
        return None
    if not words or not words[0].isdigit():
        return None
    return int(words[0]), words[1:]


def live_pid(pid_file: Path) -> int | None:
    """The pid of the file while that process is still the one noted (of this boot, with that start time), else
    None. A file of an earlier version (a bare pid, or no boot id) counts only for a process that runs this
    checkout's programs (and started when noted, where that was)."""
    found = read_pid_file(pid_file)
    if found is None:
        return None
    pid, notes = found
    if len(notes) >= 2:
        return pid if notes[:2] == [start_time(pid), boot_id()] and running(pid) else None
    if notes and start_time(pid) != notes[0]:
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return pid if f"{BIN}/" in command and running(pid) else None


def live_group(pid_file: Path) -> int | None:
    """The process group the file's process leads, also once that leader has exited while members live on (noted
    in this boot; its members started no earlier than it: a pid is not given again while a group bears it)."""
    if (pid := live_pid(pid_file)) is not None:
        return pid
    found = read_pid_file(pid_file)
    if found is None or len(found[1]) < 2 or found[1][1] != boot_id() or not found[1][0].isdigit():
        return None
    pgid, started = found[0], int(found[1][0])
    if start_time(pgid) not in (None, found[1][0]):  # the pid is another process's now
        return None
    members = group_members(pgid)
    return pgid if members and all(int(start_time(pid) or 0) >= started for pid in members) else None


def group_members(pgid: int) -> list[int]:
    """The processes of a process group that have not ended."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = process_fields(int(stat.parent.name))
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def running(pid: int) -> bool:
    """A process that has not ended (one that ended and waits for its parent to notice has)."""
    fields = process_fields(pid)
    return fields is not None and fields[0] != "Z"


def start(name: str, command: list[str], run_dir: Path, log_dir: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None, terminal: bool = False) -> int:
    """The command in a session of its own, its output in log_dir/NAME.log (or this terminal's), its pid noted in
    run_dir/NAME.pid."""
    pid_file = open_file(run_dir / f"{name}.pid", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # before it starts
    try:
        log = os.fdopen(open_file(Path(os.devnull) if terminal else log_dir / f"{name}.log",
                                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w")
    except BaseException:
        os.close(pid_file)
        raise
    with log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=None if terminal else log,
                                   stderr=None if terminal else subprocess.STDOUT, start_new_session=True,
                                   env=dict(env) if env is not None else None, cwd=cwd)
    write_pid_file(process.pid, run_dir / f"{name}.pid", pid_file)
    STARTED[process.pid] = process
    return process.pid


def watch(pid_files: dict[str, Path], log_dir: Path) -> None:
    """Until a signal: ServerFailed when a process ends (one not paused on purpose: run_dir/NAME.paused)."""
    while True:
        reap()
        for name, pid_file in pid_files.items():
            if (pid_file.parent / f"{name}.paused").exists():
                continue
            if live_pid(pid_file) is None:
                raise ended(f"{name} process", log_dir / f"{name}.log")
        time.sleep(2)


def answers(url: str) -> bool:
    """Whether an HTTP server answers at url (any status: one that wants credentials answers too)."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def wait_http(name: str, url: str, pid_file: Path, log: Path, seconds: float = 180) -> None:
    """Until the server answers at url; ServerFailed when its process ended or it did not answer in time."""
    wait_answer(f"{name} server", lambda: answers(url), pid_file, log, seconds, f" at {url}")


def wait_answer(name: str, answered: Callable[[], bool], pid_file: Path, log: Path, seconds: float,
                where: str = "") -> None:
    """Until `answered` says the server (called `name`) is up; ServerFailed when its process ended first or it did
    not answer in time."""
    deadline = time.monotonic() + seconds
    while not answered():
        if live_pid(pid_file) is None:
            raise ended(name, log)
        if time.monotonic() > deadline:
            raise ServerFailed(f"the {name} did not answer{where} in {seconds / 60:g} minutes; see {log}")
        time.sleep(0.5)


def wait_until(done: Callable[[], bool], seconds: float) -> bool:
    """Ask `done` every half second until it says yes (True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def wait_ended(pid: int, seconds: float) -> None:
    wait_until(lambda: not running(pid), seconds)


def send(signum: int, pid: int, group: bool = True) -> bool:
    """The signal to the process group `pid` leads (or, group False, to that process alone); whether it was there
    to take it (signal 0: only whether it is there)."""
    try:
        (os.killpg if group else os.kill)(pid, signum)
    except OSError:
        return False
    return True


def stop_groups(seconds: float, pid_files: list[Path], stop_log: Path) -> None:
    """TERM to the process groups of the pid files at once, KILL to those left after `seconds` in all; a pid file
    whose group is gone (or is another's now) is only removed; a group whose leader has exited is stopped too.
    Each end is noted in stop_log."""
    started = time.monotonic()
    reap()  # a leader that has exited is no zombie in its group
    groups = {}
    for pid_file in pid_files:
        pid = live_group(pid_file)
        if pid is not None and send(signal.SIGTERM, pid):
            groups[pid_file] = pid
        else:
            pid_file.unlink(missing_ok=True)
    nudged: set[Path] = set()
    while groups:
        reap()
        elapsed = time.monotonic() - started
        for pid_file, pid in list(groups.items()):
            name = pid_file.stem
            if not send(0, pid):
                noted = f"stopped in {elapsed:.0f} s"
            elif name in SECOND_SIGNAL_AFTER and pid_file not in nudged and elapsed >= SECOND_SIGNAL_AFTER[name]:
                nudged.add(pid_file)
                send(signal.SIGTERM, pid, group=False)  # the process alone (see SECOND_SIGNAL_AFTER)
                continue
            elif elapsed >= seconds:
                send(signal.SIGKILL, pid)
                noted = f"killed after {seconds:.0f} s"
            else:
                continue
            with os.fdopen(open_file(stop_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), "a") as log:
                log.write(f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')} {name}: {noted}\n")
            pid_file.unlink(missing_ok=True)
            del groups[pid_file]
        if groups:
            time.sleep(0.5)
