"""A training process told to stop (Slurm's notice, SIGTERM) stops at once, but not in the middle of a report or
checkpoint: a real process signalling itself."""
from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import os, signal, sys
from trainer.stop_notice import deferred, install
install()
with deferred():
    os.kill(os.getpid(), signal.SIG{name})
    print("checkpoint written", flush=True)
print("never printed", flush=True)
"""


def stopped(name: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(name=name)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_a_notice_in_a_checkpoint_lets_it_finish_then_stops() -> None:
    done = stopped("USR1")
    assert done.stdout.splitlines() == ["checkpoint written",
                                        "stopping on SIGUSR1: the last checkpoint stands for a resume"]
    assert done.returncode == 128 + 10


def test_a_termination_outside_a_checkpoint_stops_at_once() -> None:
    done = subprocess.run([sys.executable, "-c", "import os, signal, time\nfrom trainer.stop_notice import install\n"
                           "install()\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\nprint('late')"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "stopping on SIGTERM: the last checkpoint stands for a resume"
    assert done.returncode == 128 + 15
