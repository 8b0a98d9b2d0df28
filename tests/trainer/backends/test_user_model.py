"""A model of the user's own, from a file outside ringflow's packages: a subclassed Keras model with its own
train_step (gradients from a tape, applied with apply_gradients) trains under Horovod and MultiWorkerMirrored, its
ranks' weights equal, and the model saved reloads from the job's copy of the file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.launch.job import train
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from trainer.model_io import load_model, read_spec
from trainer.protocol import weights_digests

pytestmark = pytest.mark.slow  # real Horovod and tf.distribute jobs

OWN_MODEL = '''
import tensorflow as tf


class Digits(tf.keras.Model):
    """Dense layers on the flattened image, with a train_step of its own (the tutorials' way)."""

    def __init__(self, outputs, units):
        super().__init__()
        self.flat = tf.keras.layers.Flatten()
        self.hidden = tf.keras.layers.Dense(units, activation="relu")
        self.out = tf.keras.layers.Dense(outputs, activation="softmax")

    def call(self, images, training=False):
        return self.out(self.hidden(self.flat(images / 255.0)))

    def train_step(self, data):
        images, labels = data
        with tf.GradientTape() as tape:
            predicted = self(images, training=True)
            loss = self.compiled_loss(labels, predicted)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self.compiled_metrics.update_state(labels, predicted)
        return {metric.name: metric.result() for metric in self.metrics}


def build(input_shape, outputs, units=32):
    model = Digits(outputs, units)
    model.build((None, *input_shape))
    return model
'''


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users-project") / "my_net.py"
    path.write_text(OWN_MODEL)
    return path


@pytest.mark.parametrize("backend", ["horovod", "multiworker"])
def test_a_subclassed_model_of_the_user_s_own_trains_in_step_on_every_rank(
        backend: str, model_file: Path, digits_data: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    params = Params(train=TrainParams(backend=backend, np=2, epochs=4, warmup_epochs=1, tensorboard=False,
                                      model=f"{model_file}:build", model_args={"units": 48}))
    out = tmp_path / "model"
    train(params, digits_data, out, tmp_path / "checkpoints", None, lines.append)
    found = [digest for _, digest in weights_digests("\n".join(lines))]
    assert len(found) == 2 and found[0] == found[1], lines[-10:]  # the gradients were averaged: one model
    assert len([line for line in lines if re.search(r"epoch \d+: ", line)]) == 4
    spec = read_spec(out)
    assert spec["model_args"] == {"units": 48} and (out / spec["model_source"]).read_text() == OWN_MODEL
    model_file.write_text("raise SystemExit('the workspace file is not what a trained model reloads from')")
    try:
        assert load_model(out).count_params() == 8 * 8 * 48 + 48 + 48 * 10 + 10
        assert evaluate(out, digits_data).metrics["test_accuracy"] >= 0.8
    finally:
        model_file.write_text(OWN_MODEL)
