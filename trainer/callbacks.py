"""Keras callbacks for distributed training: metric averaging, throughput, rank-0 reporting and checkpoints."""
from __future__ import annotations

import time
from typing import Any, Callable

import tensorflow as tf

from trainer.protocol import epoch_line
from trainer.schedule import current_rate
from trainer.stop_notice import deferred


class MetricAverage(tf.keras.callbacks.Callback):
    """Replaces each epoch's metrics by their average over ranks (Horovod's own callback needs Keras 3).

    Training metrics weigh every rank equally (same steps and batch size on each); validation metrics
    are weighted by the number of validation records each rank evaluated.
    """

    def __init__(self, allreduce_sum: Callable[[Any], Any], val_records: int) -> None:
        super().__init__()
        self._allreduce_sum = allreduce_sum
        self._val_records = float(val_records)

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if not logs:
            return
        keys = sorted(logs)
        weights = [self._val_records if key.startswith("val_") else 1.0 for key in keys]
        weighted = [float(logs[key]) * weight for key, weight in zip(keys, weights)]
        summed = tf.constant(weighted + weights, dtype=tf.float64)
        totals = self._allreduce_sum(summed).numpy()  # Horovod: sum over ranks
        sums, weight_sums = totals[: len(keys)], totals[len(keys):]
        for key, total, weight_sum in zip(keys, sums, weight_sums):
            logs[key] = float(total / weight_sum) if weight_sum else float("nan")


class Throughput(tf.keras.callbacks.Callback):
    """Adds `images_per_sec` (global, training part of the epoch) and `epoch_time` to the epoch logs."""

    def __init__(self, global_images_per_epoch: int) -> None:
        super().__init__()
        self._images = global_images_per_epoch
        self._start = 0.0
        self._train_end: float | None = None

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._start, self._train_end = time.perf_counter(), None

    def on_test_begin(self, logs: dict[str, float] | None = None) -> None:
        self._train_end = self._train_end or time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        now = time.perf_counter()
        train_seconds = (self._train_end or now) - self._start
        if logs is not None:
            logs["images_per_sec"] = self._images / train_seconds
            logs["epoch_time"] = now - self._start


class EpochReport(tf.keras.callbacks.Callback):
    """Rank 0: prints one line per epoch and hands the averaged metrics to `sink(epoch, metrics)`."""

    def __init__(self, sink: Callable[[int, dict[str, float]], None] | None = None) -> None:
        super().__init__()
        self._sink = sink

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        metrics = {key: float(value) for key, value in (logs or {}).items()}
        metrics["learning_rate"] = current_rate(self.model.optimizer)
        with deferred():  # a stop signal lets the epoch's report end
            print(epoch_line(epoch, metrics), flush=True)
            if self._sink is not None:
                self._sink(epoch, metrics)


class CheckpointEveryEpoch(tf.keras.callbacks.Callback):
    """Saves model, optimizer and epoch at the end of every epoch (rank 0, or to a scratch place elsewhere)."""

    def __init__(self, checkpoints: Any) -> None:
        super().__init__()
        self._checkpoints = checkpoints

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._checkpoints.save(epoch + 1)
