"""What root does to a folder another account could change: never through a link put there. The folder is opened
with O_NOFOLLOW and changed through its descriptor (fchown, fchmod); a link found is one line naming it, and nothing
it leads to is touched (processes.open_file opens a file so)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from servers.processes import refused

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
