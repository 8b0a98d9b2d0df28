"""A sign of life from every training process: a line every few seconds, so the launcher can tell a frozen process
or a lost host (silent) from a busy one (a rank waiting in an allreduce still beats). Neither Horovod's stall check
nor MPI notices a peer that stopped: the collectives just wait.

The beats come from a small process of their own (trainer/beater.py), not from a thread: a thread needs the
interpreter's lock, which a process waiting in some of TensorFlow's calls holds (a parameter-server coordinator
waiting on a stopped worker went as silent as the worker). The beater says nothing while its process is stopped
and ends the moment its process ends, however it ends."""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
from pathlib import Path

from trainer.protocol import HEARTBEAT_END_LINE, HEARTBEAT_ENV, HEARTBEAT_LINE

BEATER = Path(__file__).with_name("beater.py")


def start_heartbeat() -> None:
    """Start beating when the launcher asked for it."""
    seconds = float(os.environ.get(HEARTBEAT_ENV) or 0)
    if seconds <= 0:
        return
    alive_read, alive_write = os.pipe()  # the write end stays in this process alone: its end is the beater's end
    subprocess.Popen([sys.executable, "-I", "-S", str(BEATER), str(os.getpid()), f"{seconds:g}", str(alive_read),
                      HEARTBEAT_LINE],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(alive_read,))
    os.close(alive_read)
    atexit.register(print, HEARTBEAT_END_LINE, flush=True)
    atexit.register(os.close, alive_write)  # runs first: no beat after the end line
