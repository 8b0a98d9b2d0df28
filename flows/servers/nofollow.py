"""What root does to a path another account could change: never through a link put there. A folder is opened with
O_NOFOLLOW and changed through its descriptor (fchown, fchmod), and a file is created or opened in it with
O_NOFOLLOW; a link found is one line naming it, and nothing it leads to is touched."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from flows.servers.processes import ServerFailed

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def refused(path: Path, error: OSError) -> ServerFailed:
    """The one line for a path that is a link (or no folder where one is due): refused, nothing done to it."""
    what = "a link" if os.path.islink(path) else f"not a folder ({error.strerror})"
    return ServerFailed(f"{path} is {what}: refused (root follows no link in the services' folders); remove it")


def folder_descriptor(path: Path) -> int:
    """A descriptor of the folder at path, opened without following a link at its last step."""
    try:
        return os.open(path, FOLDER_FLAGS)
    except OSError as error:
        raise refused(path, error) from None


def own_folder(path: Path, mode: int, owner: int = -1) -> None:
    """The folder at path, made when missing (its parent exists), then given `mode` and (other than -1) `owner`
    through a descriptor: a link put in its place is refused, and what it leads to keeps its owner and mode."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    descriptor = folder_descriptor(path)
    try:
        if owner != -1 and os.fstat(descriptor).st_uid != owner:
            os.fchown(descriptor, owner, -1)
        os.fchmod(descriptor, mode)
    finally:
        os.close(descriptor)


def open_file(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open of path with O_NOFOLLOW: a link there is refused in one line."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as error:
        if os.path.islink(path):
            raise refused(path, error) from None
        raise
