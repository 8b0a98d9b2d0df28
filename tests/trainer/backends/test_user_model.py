"""A model of the user's own, from a file outside ringflow's packages (examples/own-image-model's, copied to a user's
folder): a subclassed Keras model with its own train_step (gradients from a tape, applied with apply_gradients)
trains under Horovod and MultiWorkerMirrored, its ranks' weights equal, and the model saved reloads from the job's
copy of the file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.launch.job import train
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from tests.helpers import ROOT
from trainer.model_io import load_model, read_spec
from trainer.protocol import weights_digests

pytestmark = pytest.mark.slow  # real Horovod and tf.distribute jobs

OWN_MODEL = (ROOT / "examples" / "own-image-model" / "model.py").read_text()  # a subclassed model, own train_step
FILTERS, UNITS = 8, 48  # its build's filters (default) and units (given)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users-project") / "my_net.py"  # outside ringflow's packages
    path.write_text(OWN_MODEL)
    return path


@pytest.mark.parametrize("backend", ["horovod"])  # multiworker: tests/examples/test_own_model_pipeline.py
def test_a_subclassed_model_of_the_user_s_own_trains_in_step_on_every_rank(
        backend: str, model_file: Path, digits_data: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    params = Params(train=TrainParams(backend=backend, np=2, epochs=4, warmup_epochs=1, tensorboard=False,
                                      model=f"{model_file}:build", model_args={"units": UNITS}))
    out = tmp_path / "model"
    train(params, digits_data, out, tmp_path / "checkpoints", None, lines.append)
    found = [digest for _, digest in weights_digests("\n".join(lines))]
    assert len(found) == 2 and found[0] == found[1], lines[-10:]  # the gradients were averaged: one model
    assert len([line for line in lines if re.search(r"epoch \d+: ", line)]) == 4
    spec = read_spec(out)
    assert spec["model_args"] == {"units": UNITS} and (out / spec["model_source"]).read_text() == OWN_MODEL
    model_file.write_text("raise SystemExit('the workspace file is not what a trained model reloads from')")
    try:
        convolutions = (3 * 3 * 1 * FILTERS + FILTERS) + (3 * 3 * FILTERS * FILTERS + FILTERS)
        assert load_model(out).count_params() == convolutions + 8 * 8 * FILTERS * UNITS + UNITS + UNITS * 10 + 10
        assert evaluate(out, digits_data).metrics["test_accuracy"] >= 0.8
    finally:
        model_file.write_text(OWN_MODEL)


FIELD_MODEL = '''
import tensorflow as tf


def build(input_shape, outputs, units=32):
    inputs = tf.keras.Input(input_shape)
    hidden = tf.keras.layers.Dense(units, activation="tanh")(inputs)
    hidden = tf.keras.layers.Dense(units, activation="tanh")(hidden)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(outputs)(hidden))


def l1(targets, predicted):
    """The mean absolute error of each example: the loss the custom loops must take from train.loss."""
    return tf.reduce_mean(tf.abs(targets - predicted), axis=-1)
'''


@pytest.fixture(scope="module")
def field_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A physical field u(x, t) = sin(pi x) exp(-t) sampled at 2,000 points, prepared as tensor data."""
    import numpy as np

    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    folder = tmp_path_factory.mktemp("field")
    points = np.random.default_rng(0).uniform([-1.0, 0.0], [1.0, 1.0], (2000, 2)).astype(np.float32)
    np.savez(folder / "field.npz", x=points, y=np.sin(np.pi * points[:, 0]) * np.exp(-points[:, 1]))
    prepare(DataParams(dataset=f"npz:{folder / 'field.npz'}", min_shards=4), folder / "prepared", progress=False)
    (folder / "field_net.py").write_text(FIELD_MODEL)
    return folder


# (Keras fit with the task's own loss, mean squared error: examples/field-regressor's pipeline test)
@pytest.mark.parametrize(("backend", "loss"), [("horovod-tape", "field_net.py:l1")])
def test_a_regressor_of_the_user_s_own_fits_a_field_on_two_ranks(backend: str, loss: str | None, field_data: Path,
                                                                 tmp_path: Path) -> None:
    """Regression is read from the data: mean squared error is the loss (or train.loss, here the user's own in
    the GradientTape loop), mae the epochs' metric, on every rank."""
    lines: list[str] = []
    params = Params(train=TrainParams(backend=backend, np=2, epochs=8, warmup_epochs=1, tensorboard=False,
                                      batch_size=32, learning_rate=0.01, model=f"{field_data / 'field_net.py'}:build",
                                      loss=f"{field_data / loss}" if loss else None))
    out = tmp_path / "model"
    train(params, field_data / "prepared", out, tmp_path / "checkpoints", None, lines.append)
    found = [digest for _, digest in weights_digests("\n".join(lines))]
    assert len(found) == 2 and found[0] == found[1], lines[-10:]
    epochs = [line for line in lines if re.search(r"epoch \d+: ", line)]
    assert len(epochs) == 8 and all(" val_mae=" in line and "accuracy" not in line for line in epochs), epochs[-1]
    final_mae = float(re.search(r" val_mae=([\d.e-]+)", epochs[-1])[1])
    assert final_mae < 0.15, epochs[-1]  # the field's values span [-1, 1]
    final_loss = float(re.search(r" val_loss=([\d.e-]+)", epochs[-1])[1])
    if loss:  # the loop's loss is the user's l1: the mean absolute error itself
        assert final_loss == pytest.approx(final_mae, rel=1e-3), epochs[-1]
    else:  # mean squared error: below the absolute one where the errors are below 1
        assert final_loss < final_mae, epochs[-1]
    assert read_spec(out)["task"] == "regression" and read_spec(out)["outputs"] == 1
