"""Who may change the prepared data while others read it: a run holds a shared lock on it from preflight to
register (a `dvc repro` stage, for its length); prepare (when it converts) and restore hold it exclusively, and wait
for the runs that use it, saying which. Each holder leaves its name in a file of its own while it holds the lock,
so that a waiter can say for whom it waits. flock: a holder that dies lets go."""
from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from pathlib import Path
from typing import Callable, Iterator

from tasks.atomic import write_text_atomic
from tasks.paths import LOCKS_DIR

LOCK_FILE = LOCKS_DIR / "prepared-data.lock"  # its holders' names in the sibling folder prepared-data.holders/


class DataHolder:
    """This process's name among the lock's holders (a file named by its PID and a random part)."""

    def __init__(self, who: str, holders_dir: Path) -> None:
        self.file = holders_dir / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.rename(who)

    def rename(self, who: str) -> None:
        """Say who holds it now (a run once it has an id)."""
        write_text_atomic(self.file, who)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holders(holders_dir: Path) -> list[str]:
    """Who holds the lock now, by their own names (a holder killed before it could remove its file is left out)."""
    names = []
    for file in sorted(holders_dir.glob("*-*")) if holders_dir.is_dir() else []:
        pid = file.name.split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            with contextlib.suppress(OSError):
                names.append(f"{file.read_text().strip()} (pid {pid})")
    return names


@contextlib.contextmanager
def prepared_data_lock(exclusive: bool, who: str, on_line: Callable[[str], None] = print,
                       lock_file: Path | None = None) -> Iterator[DataHolder]:
    """Hold the prepared data's lock (shared: reading it; exclusive: changing it) for the block; a wait is said in
    one line naming whom it waits for. `lock_file`: LOCK_FILE unless given."""
    lock_file = lock_file or LOCK_FILE
    holders_dir = lock_file.with_suffix(".holders")
    holders_dir.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            using = ", ".join(holders(holders_dir)) or "another process"
            on_line(f"{who}: waiting for the prepared data, {'in use by' if exclusive else 'being changed by'} "
                    f"{using}")
            fcntl.flock(handle, mode)
        holder = DataHolder(who, holders_dir)
        try:
            yield holder
        finally:
            holder.file.unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)
