"""Checkpoints: model, optimizer and epoch every epoch, the last K kept; resume and plain restore.

TensorFlow writes a checkpoint's files first and then atomically rewrites the `checkpoint` index,
so the latest checkpoint it names is always complete. Beside them, `owner.json` (trainer/checkpoint_files.py) names
the config and code version the checkpoints belong to.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import tensorflow as tf

from trainer.checkpoint_files import OWNER_FILE, check_owner, checkpoint_owner
from trainer.stop_notice import deferred


class Checkpoints:
    """A checkpoint directory for one model and optimizer.

    Every process restores from `directory` (so all build the same optimizer state); a process that must
    save without keeping (a non-lead worker of a collective strategy) saves to `save_dir` instead.
    """

    def __init__(self, directory: Path, model: Any, optimizer: Any, keep: int, owner: str,
                 save_dir: Path | None = None) -> None:
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self._directory, self._owner, self._keeps = Path(directory), owner, save_dir is None
        self._state = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=self.epoch)
        self._manager = tf.train.CheckpointManager(self._state, str(save_dir or directory), max_to_keep=keep)

    def restore_latest(self) -> int:
        """Restore the latest checkpoint if there is one; returns the epochs it had completed (0 if none)."""
        latest = tf.train.latest_checkpoint(str(self._directory))
        if latest is None:
            return 0
        check_owner(self._directory, self._owner)
        self._state.restore(latest)
        return int(self.epoch.numpy())

    def save(self, epochs_done: int) -> str:
        """Save model, optimizer and epoch; the keeping process also records whom the checkpoints belong to. A stop
        signal waits for the save to end."""
        with deferred():
            self.epoch.assign(epochs_done)
            if self._keeps and checkpoint_owner(self._directory) is None:
                self._directory.mkdir(parents=True, exist_ok=True)
                tmp = self._directory / f".{OWNER_FILE}.tmp"
                tmp.write_text(json.dumps({"owner": self._owner}))
                os.replace(tmp, self._directory / OWNER_FILE)
            return self._manager.save(checkpoint_number=epochs_done)


def restore_weights(model: Any, directory: Path) -> int:
    """Load only the model's weights from the latest checkpoint (with or without a strategy scope)."""
    latest = tf.train.latest_checkpoint(str(directory))
    if latest is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    epoch = tf.Variable(0, dtype=tf.int64)
    tf.train.Checkpoint(model=model, epoch=epoch).restore(latest).expect_partial()
    return int(epoch.numpy())
