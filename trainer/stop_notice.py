"""A training process told to stop (Slurm's notice before a time limit or preemption: SIGUSR1 by `--signal`;
SIGTERM from Slurm, a launcher or the admins; SIGHUP when its ssh session goes) stops at once, except in the middle
of an epoch's report or checkpoint: those finish first. A requeued job or a retry then resumes from that checkpoint
and loses at most the epoch in progress. Imports no TensorFlow.
"""
from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from trainer.protocol import stopping_line

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP)
_state = {"depth": 0, "pending": 0}  # open deferred() sections; a signal that arrived in one (0: none)


def _stop(signum: int) -> None:
    print(stopping_line(signal.Signals(signum).name), flush=True)
    sys.stderr.flush()
    os._exit(128 + signum)  # as a shell reports a process ended by the signal; no interpreter teardown to hang in


def _on_signal(signum: int, frame: Any) -> None:
    if _state["depth"]:
        _state["pending"] = signum
    else:
        _stop(signum)


def install() -> None:
    """Stop on the stop signals, after any report or checkpoint in progress (main thread, before training)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


@contextmanager
def deferred() -> Iterator[None]:
    """A section a stop signal does not cut short: it takes effect when the section ends."""
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if not _state["depth"] and _state["pending"]:
            _stop(_state["pending"])
