"""The Keras callbacks of distributed training: epoch metrics averaged over ranks (validation weighted by each
rank's records), throughput of the training part of the epoch, rank 0's epoch line and sink with the rate of the
last step, and a checkpoint at the end of every epoch."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf

from trainer.callbacks import CheckpointEveryEpoch, EpochReport, MetricAverage, Throughput
from trainer.checkpoint_files import saved_epochs
from trainer.checkpoints import Checkpoints
from trainer.protocol import parse_epoch_line
from trainer.schedule import WarmupSchedule


def sum_over(ranks: int) -> Callable[[Any], Any]:
    """An allreduce sum over `ranks` threads, one per rank (each call blocks until every rank has sent)."""
    sent: list[Any] = []
    barrier = threading.Barrier(ranks)

    def allreduce_sum(tensor: Any) -> Any:
        sent.append(tensor)
        barrier.wait()
        return tf.add_n(sent)
    return allreduce_sum


def averaged(logs_per_rank: list[dict[str, float]], val_records: list[int]) -> list[dict[str, float]]:
    """Each rank's logs after MetricAverage, the ranks' ends of epoch running at the same time."""
    allreduce_sum = sum_over(len(logs_per_rank))
    threads = [threading.Thread(target=MetricAverage(allreduce_sum, records).on_epoch_end, args=(0, logs))
               for logs, records in zip(logs_per_rank, val_records)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return logs_per_rank


def test_training_metrics_are_the_ranks_mean_and_validation_weighs_each_ranks_records() -> None:
    logs = averaged([{"loss": 1.0, "val_loss": 3.0}, {"loss": 3.0, "val_loss": 1.0}], val_records=[10, 30])
    assert logs[0] == logs[1] == {"loss": 2.0, "val_loss": pytest.approx((3.0 * 10 + 1.0 * 30) / 40)}


def test_validation_that_no_rank_ran_averages_to_nan_and_empty_logs_stay_empty() -> None:
    (logs,) = averaged([{"loss": 1.5, "val_loss": 0.0}], val_records=[0])
    assert logs["loss"] == 1.5 and np.isnan(logs["val_loss"])
    empty: dict[str, float] = {}
    MetricAverage(sum_over(1), 10).on_epoch_end(0, empty)
    assert empty == {}


def test_throughput_counts_the_training_part_of_the_epoch_only() -> None:
    throughput, logs = Throughput(global_images_per_epoch=1000), {}
    throughput.on_epoch_begin(0)
    time.sleep(0.05)
    throughput.on_test_begin()  # validation starts
    time.sleep(0.5)
    throughput.on_epoch_end(0, logs)
    training_seconds = 1000 / logs["images_per_sec"]
    assert training_seconds >= 0.05 and logs["epoch_time"] - training_seconds >= 0.5 - 1e-3  # validation left out


def test_a_fit_reports_each_epoch_with_its_last_rate_and_checkpoints_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(2, activation="softmax")])
    model.compile(tf.keras.optimizers.legacy.Adam(WarmupSchedule(0.0, 0.01, 8)), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    images, labels = np.random.default_rng(0).normal(size=(32, 4)), np.arange(32) % 2
    reported: list[tuple[int, dict[str, float]]] = []
    checkpoints = Checkpoints(tmp_path, model, model.optimizer, keep=3, owner="test")
    model.fit(images, labels, batch_size=8, epochs=2, validation_data=(images, labels), verbose=0,
              callbacks=[Throughput(32), EpochReport(lambda epoch, metrics: reported.append((epoch, metrics))),
                         CheckpointEveryEpoch(checkpoints)])
    shown = [parsed for line in capsys.readouterr().out.splitlines() if (parsed := parse_epoch_line(line))]
    assert [epoch for epoch, _ in shown] == [1, 2] and [epoch for epoch, _ in reported] == [0, 1]
    rates = [metrics["learning_rate"] for _, metrics in reported]
    assert rates == pytest.approx([0.01 * 3 / 8, 0.01 * 7 / 8])  # steps 3, 7
    assert set(reported[1][1]) == {"loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec", "epoch_time",
                                   "learning_rate"}
    assert shown[1][1]["loss"] == pytest.approx(reported[1][1]["loss"], rel=1e-3)  # the line shows 4 digits
    assert saved_epochs(tmp_path) == 2
