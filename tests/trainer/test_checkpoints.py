"""Checkpoints restore into a plain model and into one under a strategy."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.params import Params, TrainParams
from tests.trainer.backends.test_backends import train_for_test

pytestmark = pytest.mark.slow  # a real Horovod job


def test_checkpoint_restores_with_and_without_a_strategy(digits_data: Path, tmp_path: Path) -> None:
    import numpy as np
    import tensorflow as tf

    from trainer.checkpoints import restore_weights
    from trainer.model_io import load_model
    from trainer.models import build_model
    params = Params(train=TrainParams(np=2, epochs=2, tensorboard=False))
    out = train_for_test(params, digits_data, tmp_path, [])
    directory = tmp_path / "checkpoints"
    trained = load_model(out).get_weights()
    plain = build_model("cnn", (8, 8, 1), 10)
    assert restore_weights(plain, directory) == 2
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = build_model("cnn", (8, 8, 1), 10)
        assert restore_weights(mirrored, directory) == 2
    for model in (plain, mirrored):
        assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), trained))
