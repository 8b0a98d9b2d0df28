"""Ctrl-C, noticed once and for the whole process: the first SIGINT raises KeyboardInterrupt in the main thread and
is remembered; later ones are only remembered, so that stopping what the run started always finishes.

The handler is installed even where SIGINT was ignored when the process started (a shell starts background jobs
so, and CI may run the suite so): the processes a run starts have handlers of their own (mpirun, the Slurm
follower) and would otherwise be the only ones to see the interrupt, their end then reported as a failure.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

_seen = threading.Event()


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    first = not _seen.is_set()
    _seen.set()
    if first:
        raise KeyboardInterrupt


def catch_interrupts() -> None:
    """Install the handler (from the main thread)."""
    signal.signal(signal.SIGINT, _on_interrupt)


def interrupted() -> bool:
    """Whether Ctrl-C was pressed in this process's life."""
    return _seen.is_set()


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C held back while the block runs and raised when it ends: for starting processes, so that an interrupt
    never leaves one started but unknown to whoever stops them. What starts meanwhile keeps SIGINT blocked (a
    process inherits the mask): the terminal's Ctrl-C then reaches the one process that stops them all. In another
    thread (a sweep's trial) only the started processes' mask matters: the main thread still takes the interrupt,
    and the thread that follows the job sees interrupted() and stops it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
