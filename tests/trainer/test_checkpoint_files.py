"""What a checkpoint directory says without TensorFlow: whom its checkpoints belong to (another job's are refused
as bad input), how many epochs the latest one TensorFlow wrote holds, and that a job with none left is an error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import tensorflow as tf

from trainer.checkpoint_files import (
    OWNER_FILE,
    CheckpointMismatch,
    check_epochs_left,
    check_owner,
    checkpoint_owner,
    saved_epochs,
)
from trainer.checkpoints import Checkpoints


def test_a_directory_nothing_was_saved_in_belongs_to_nobody_and_holds_no_epoch(tmp_path: Path) -> None:
    for directory in (tmp_path, tmp_path / "missing"):
        assert checkpoint_owner(directory) is None and saved_epochs(directory) == 0
        check_owner(directory, "any job")  # no error: nothing to refuse


def test_checkpoints_of_another_config_or_code_version_are_refused_as_bad_input(tmp_path: Path) -> None:
    (tmp_path / OWNER_FILE).write_text(json.dumps({"owner": "abc"}))
    check_owner(tmp_path, "abc")
    with pytest.raises(CheckpointMismatch, match=r"belong to another config or code version \(abc, this job is "
                                                 r"xyz\): start a new run instead of resuming$") as refused:
        check_owner(tmp_path, "xyz")
    assert refused.value.bad_input and isinstance(refused.value, ValueError)


def test_the_epochs_are_those_of_the_latest_checkpoint_tensorflow_wrote(tmp_path: Path) -> None:
    model = tf.keras.Sequential([tf.keras.layers.Input((2,)), tf.keras.layers.Dense(1)])
    checkpoints = Checkpoints(tmp_path, model, tf.keras.optimizers.legacy.Adam(), keep=1, owner="abc")
    for epochs in (1, 2, 3):
        checkpoints.save(epochs)
        assert saved_epochs(tmp_path) == epochs
    assert checkpoint_owner(tmp_path) == "abc"


def test_checkpoints_of_more_epochs_than_the_job_trains_are_an_error() -> None:
    check_epochs_left(2, 3)
    check_epochs_left(3, 3)  # all of them: the job saves the model they hold
    for started in (4, 5):
        with pytest.raises(ValueError, match=f"^nothing to train: the checkpoints already hold {started} epochs and "
                                             "train.epochs is 3$"):
            check_epochs_left(started, 3)
