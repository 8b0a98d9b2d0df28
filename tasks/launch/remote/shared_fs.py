"""Whether a host shares this machine's filesystem (train.shared_fs), asked of it at each launch's preflight.

Just before the hosts are probed, this machine writes a file with a fresh random name; a host that sees that very
file at the same path shares the filesystem. A fresh name per launch, not an id kept in the checkout: hosts that
each hold a copy of the checkout (rsync of the project, outputs/ included) would carry a kept id along.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Literal

from tasks.atomic import write_text_atomic

SharedFs = Literal["auto"] | bool
TOKENS_DIR_NAME = ".shared-fs-tokens"


@contextmanager
def fresh_token(outputs_dir: Path) -> Iterator[Path]:
    """A file with a new random name under `outputs_dir` while the hosts are asked; removed after."""
    token_file = outputs_dir / TOKENS_DIR_NAME / uuid.uuid4().hex
    write_text_atomic(token_file, "ringflow: a host that sees this file shares this machine's filesystem\n")
    try:
        yield token_file
    finally:
        token_file.unlink(missing_ok=True)


def hosts_without_shared_fs(shared_fs: SharedFs, answers: dict[str, dict]) -> tuple[str, ...]:
    """The probed hosts that get the data shipped (all of them for False, those not seeing the token for auto)."""
    if shared_fs is True:
        return ()
    return tuple(host for host, answer in answers.items() if shared_fs is False or not answer["sees_token"])


def shared_fs_problem(shared_fs: SharedFs, answers: dict[str, dict], checkout: Path) -> str | None:
    """A host that contradicts train.shared_fs, in one line; None when none does."""
    if shared_fs == "auto":
        return None
    for host, answer in answers.items():
        if answer["sees_token"] != shared_fs:
            what = "does not see" if shared_fs else "sees"
            return (f"host {host} {what} this machine's checkout at {checkout} (train.shared_fs: "
                    f"{str(shared_fs).lower()}): set train.shared_fs to auto")
    return None
