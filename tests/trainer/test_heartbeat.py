"""The heartbeat: a process the launcher asks to beat prints a line every few seconds from a thread of its own
(also while its main thread is busy) and a last line when it ends of its own accord; one not asked stays silent."""
from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT, quiet_env
from trainer.protocol import HEARTBEAT_END_LINE, HEARTBEAT_ENV, HEARTBEAT_LINE

BUSY = "import sys, time; from trainer.heartbeat import start_heartbeat; start_heartbeat(); " \
       "time.sleep(float(sys.argv[1])); print('done')"


def lines_of_a_busy_process(seconds: str | None, busy: float) -> list[str]:
    """What a process that starts the heartbeat (every `seconds`, if given) and then sleeps `busy` seconds prints."""
    env = quiet_env()
    env.pop(HEARTBEAT_ENV, None)
    if seconds is not None:
        env[HEARTBEAT_ENV] = seconds
    done = subprocess.run([sys.executable, "-c", BUSY, str(busy)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_process_asked_to_beat_beats_while_busy_and_says_when_it_ends() -> None:
    lines = lines_of_a_busy_process("0.1", busy=1.0)
    assert lines[-2:] == ["done", HEARTBEAT_END_LINE]
    assert set(lines[:-2]) == {HEARTBEAT_LINE} and len(lines[:-2]) >= 2  # beats while the main thread sleeps


def test_a_process_not_asked_to_beat_is_silent() -> None:
    assert lines_of_a_busy_process(None, busy=0.3) == ["done"]
    assert lines_of_a_busy_process("0", busy=0.3) == ["done"]
