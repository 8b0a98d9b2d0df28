"""The heartbeat of one training process, beside it: `python -I -S beater.py PID SECONDS FD LINE` writes LINE to
its standard error every SECONDS while process PID runs (not while it is stopped), and ends when FD, the read end
of a pipe only that process can write to, reaches its end (that process ended). Standard library only: it starts
in milliseconds."""
from __future__ import annotations

import os
import select
import signal
import sys


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP, a debugger), from its state in /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def main(pid: int, seconds: float, alive_fd: int, line: bytes) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for its process; this one ends with it
    while not select.select([alive_fd], [], [], seconds)[0]:  # readable only at the end: nobody writes to it
        if stopped(pid):
            continue
        try:
            os.write(2, line)  # one write: never inside another writer's line
        except OSError:  # whoever read the output is gone
            return


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4].encode() + b"\n")
