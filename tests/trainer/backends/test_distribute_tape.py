"""The custom loop of `mirrored-tape` and `multiworker-tape` under a strategy: its steps train and count every
replica's examples, validation scores the whole split weighted by example (not by batch), and an epoch reports
its metrics with the rate of the last step (a one-replica strategy here)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.configs import trainer_config
from trainer import session
from trainer.backends.distribute import strategy_plan, train_input
from trainer.backends.distribute_tape import StrategyTapeLoop, run_epoch, validation
from trainer.data import rank_dataset


@pytest.fixture()
def loop_and_input(digits_data: Path, tmp_path: Path) -> tuple[StrategyTapeLoop, Any, Any, session.Plan]:
    """(the loop, its training batches, the validation batches, the plan) of a `mirrored-tape` job of one replica."""
    config = trainer_config(digits_data, tmp_path, backend="mirrored-tape", warmup_epochs=1)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    run = strategy_plan(config, strategy)
    batches = iter(strategy.distribute_datasets_from_function(train_input(config, run)))
    validation_data = rank_dataset(digits_data, run.manifest, "validation", batch_size=run.global_batch,
                                   input_shape=run.input_shape)
    return StrategyTapeLoop(config, run, strategy), batches, validation_data, run


def test_steps_train_the_model_and_count_every_example_until_collected(loop_and_input: tuple) -> None:
    loop, batches, _, run = loop_and_input
    before = loop.model.get_weights()
    loop.train_step(batches)
    loop.train_step(batches)
    assert not all(np.array_equal(a, b) for a, b in zip(before, loop.model.get_weights()))
    assert float(loop.sums["seen"].result()) == 2 * run.global_batch and float(loop.sums["loss"].result()) > 0
    collected = loop.collect()
    assert set(collected) == {"loss", "accuracy"} and 0 <= collected["accuracy"] <= 1 and collected["loss"] > 0
    assert all(float(total.result()) == 0 for total in loop.sums.values())  # the next epoch counts afresh


def test_validation_scores_every_example_of_the_split_once(loop_and_input: tuple) -> None:
    loop, _, validation_data, run = loop_and_input
    losses, hits = [], []
    for images, labels in validation_data:  # batches of 128, 128 and 14: a mean of batch means would differ
        probabilities = loop.model(images, training=False).numpy()
        losses += (-np.log(np.maximum(probabilities[np.arange(len(labels)), labels.numpy()], 1e-7))).tolist()
        hits += (probabilities.argmax(-1) == labels.numpy()).tolist()
    assert len(losses) == run.manifest["splits"]["validation"]["count"]
    assert validation(loop, validation_data) == pytest.approx({"val_loss": np.mean(losses),
                                                               "val_accuracy": np.mean(hits)}, rel=1e-5)


def test_an_epoch_reports_training_validation_throughput_and_the_rate_of_its_last_step(
        loop_and_input: tuple) -> None:
    loop, batches, validation_data, run = loop_and_input
    logs = run_epoch(loop, batches, validation_data, run)
    assert set(logs) == {"loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec", "epoch_time",
                         "learning_rate"}
    assert int(loop.optimizer.iterations.numpy()) == run.steps_per_epoch and logs["images_per_sec"] > 0
    assert logs["learning_rate"] == pytest.approx(run.learning_rate[1] * (run.steps_per_epoch - 1) / run.warmup_steps)


def test_mixed_float16_trains_through_a_loss_scale_optimizer(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="mirrored-tape", precision="mixed_float16",
                            warmup_epochs=0)  # the first step's rate is not 0
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    run = strategy_plan(config, strategy)
    session.set_precision(config)
    try:
        loop = StrategyTapeLoop(config, run, strategy)
        batches = iter(strategy.distribute_datasets_from_function(train_input(config, run)))
        before = loop.model.get_weights()
        loop.train_step(batches)
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
    assert isinstance(loop.optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    assert np.isfinite(loop.collect()["loss"])
    assert not all(np.array_equal(a, b) for a, b in zip(before, loop.model.get_weights()))
