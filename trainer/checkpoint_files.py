"""What a checkpoint directory says without TensorFlow (the launcher reads it before a launch): whom the
checkpoints belong to (`owner.json`: config and code version; a job of another refuses them) and how many epochs
the latest one holds."""
from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

OWNER_FILE = "owner.json"
# Tests only (the launcher forwards it to the ranks): a file that the first process to end its epochs creates before
# it dies, as a rank lost between the last epoch's checkpoint and the model's save (fail_before_save)
FAIL_BEFORE_SAVE_ENV = "RINGFLOW_TEST_FAIL_BEFORE_SAVE"


class CheckpointMismatch(ValueError):
    """The checkpoints were written by another config or code version."""
    bad_input = True  # the launcher's error report reads this: the input, not the run, is wrong


def checkpoint_owner(directory: Path) -> str | None:
    """Whom the checkpoints in `directory` belong to (None when nothing was saved there yet)."""
    path = Path(directory) / OWNER_FILE
    return json.loads(path.read_text())["owner"] if path.is_file() else None


def check_owner(directory: Path, owner: str) -> None:
    """Raise CheckpointMismatch when the checkpoints in `directory` belong to someone else."""
    found = checkpoint_owner(directory)
    if found is not None and found != owner:
        raise CheckpointMismatch(f"the checkpoints in {directory} belong to another config or code version "
                                 f"({found}, this job is {owner}): start a new run instead of resuming")


def saved_epochs(directory: Path) -> int:
    """Epochs completed by the latest checkpoint, read from the `checkpoint` index without TensorFlow (0: none)."""
    index = Path(directory) / "checkpoint"
    found = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', index.read_text(), re.M) if index.is_file() else None
    return int(found[1]) if found else 0


def check_epochs_left(started: int, epochs: int) -> None:
    """Checkpoints of more epochs than the job trains are an error (of exactly as many, the job saves the model
    they hold: its training ended before the save)."""
    if started > epochs:
        raise ValueError(f"nothing to train: the checkpoints already hold {started} epochs and train.epochs is "
                         f"{epochs}")


def fail_before_save() -> None:
    """Tests only: when FAIL_BEFORE_SAVE_ENV names a file that does not exist yet, create it and die by SIGKILL,
    once for the whole job (the file exists for the other processes and for the retry, which go on)."""
    marker = os.environ.get(FAIL_BEFORE_SAVE_ENV)
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)
