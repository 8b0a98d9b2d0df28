"""The heartbeat: a process the launcher asks to beat has a line written every few seconds beside it (also while
its main thread holds the interpreter's lock, never while it is stopped) and prints a last line when it ends of its
own accord; the beats end with it, however it ends; one not asked stays silent."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from tests.helpers import ROOT, quiet_env
from trainer.protocol import HEARTBEAT_END_LINE, HEARTBEAT_ENV, HEARTBEAT_LINE

# The main thread stuck in a C call that keeps the interpreter's lock (a PyDLL call does not release it), as in
# some of TensorFlow's waits.
HOLDS_THE_LOCK = "import ctypes, sys; from trainer.heartbeat import start_heartbeat; start_heartbeat(); " \
                 "print('ready', flush=True); ctypes.PyDLL(None).sleep(int(sys.argv[1])); print('done')"


def start(seconds: str | None, busy: int) -> subprocess.Popen:
    env = quiet_env()
    env.pop(HEARTBEAT_ENV, None)
    if seconds is not None:
        env[HEARTBEAT_ENV] = seconds
    return subprocess.Popen([sys.executable, "-c", HOLDS_THE_LOCK, str(busy)], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def output_of(seconds: str | None, busy: int) -> tuple[list[str], list[str]]:
    """What such a process prints (every `seconds`, if given, while it holds the lock `busy` seconds)."""
    process = start(seconds, busy)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    return stdout.splitlines(), stderr.splitlines()


def timed_lines(process: subprocess.Popen) -> list[tuple[float, str]]:
    """The process's standard error as it comes (read by a thread), each line with when it came."""
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            lines.append((time.monotonic(), line.rstrip("\n")))
    threading.Thread(target=read, daemon=True).start()
    return lines


def test_a_process_asked_to_beat_beats_while_it_holds_the_lock_and_says_when_it_ends() -> None:
    stdout, stderr = output_of("0.1", busy=2)
    assert stdout == ["ready", "done", HEARTBEAT_END_LINE]
    assert set(stderr) == {HEARTBEAT_LINE} and len(stderr) >= 5, stderr  # beats while the main thread is stuck


def test_a_stopped_process_does_not_beat_and_beats_again_when_continued() -> None:
    process = start("0.1", busy=4)
    beats = timed_lines(process)
    assert process.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    time.sleep(0.5)
    process.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(1.5)
    process.send_signal(signal.SIGCONT)
    continued = time.monotonic()
    process.wait(timeout=60)
    when = [at for at, _ in beats]
    assert not [at for at in when if stopped + 0.3 < at < continued], when  # a beat in flight may still land
    assert [at for at in when if at < stopped] and [at for at in when if at > continued], when


def test_the_beats_end_with_a_process_that_is_killed() -> None:
    process = start("30", busy=60)  # a beat every 30 s: the beater ends on its process's end, not at its next beat
    assert process.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    process.kill()
    ended = threading.Event()
    threading.Thread(target=lambda: (process.stderr.read(), ended.set()), daemon=True).start()  # type: ignore
    assert ended.wait(10)  # nothing holds the process's output open any more: the beater is gone


def test_a_process_not_asked_to_beat_is_silent() -> None:
    assert output_of(None, busy=0) == (["ready", "done"], [])
    assert output_of("0", busy=0) == (["ready", "done"], [])
