"""A sign of life from every training process: a line every few seconds from a thread of its own, so the launcher
can tell a frozen process or a lost host (silent) from a busy one (a rank waiting in an allreduce still beats).
Neither Horovod's stall check nor MPI notices a peer that stopped: the collectives just wait."""
from __future__ import annotations

import atexit
import os
import threading
import time

from trainer.protocol import HEARTBEAT_END_LINE, HEARTBEAT_ENV, HEARTBEAT_LINE


def _beat(seconds: float) -> None:
    while True:
        time.sleep(seconds)
        print(HEARTBEAT_LINE, flush=True)


def start_heartbeat() -> None:
    """Start beating when the launcher asked for it."""
    seconds = float(os.environ.get(HEARTBEAT_ENV) or 0)
    if seconds > 0:
        threading.Thread(target=_beat, args=(seconds,), name="heartbeat", daemon=True).start()
        atexit.register(print, HEARTBEAT_END_LINE, flush=True)
