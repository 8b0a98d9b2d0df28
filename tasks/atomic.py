"""Atomic outputs (build in a temporary sibling, then rename into place) and a lock between processes."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def _umask() -> int:
    """This process's umask (reading it means setting it: put back at once)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces `target` only if the block completes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
    try:
        yield tmp
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))  # a name of its own
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file via a temporary sibling of a name of its own, and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file via a temporary sibling and rename."""
    write_bytes_atomic(path, text.encode())


def lock_held(lock_file: Path) -> bool:
    """Whether another process holds file_lock(lock_file) right now."""
    if not lock_file.is_file():
        return False
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


@contextlib.contextmanager
def file_lock(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive flock on lock_file for the block (released too when the process dies)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
