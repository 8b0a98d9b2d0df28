"""What a checkpoint directory says without TensorFlow (the launcher reads it before a launch): whom the
checkpoints belong to (`owner.json`: config and code version; a job of another refuses them) and how many epochs
the latest one holds."""
from __future__ import annotations

import json
import re
from pathlib import Path

OWNER_FILE = "owner.json"


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
    """A job that would train no epoch is an error, not a finished run."""
    if started >= epochs:
        raise ValueError(f"nothing to train: the checkpoints already hold {started} epochs and train.epochs is "
                         f"{epochs}")
