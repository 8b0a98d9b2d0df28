"""Backend `horovod-tape`: a custom training loop with hvd.DistributedGradientTape, as in the DeepXDE Horovod
tutorial for TensorFlow 2.

Variables are broadcast from rank 0 after the first step (when the optimizer's slots exist).
"""
from __future__ import annotations

import time
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf

from trainer import loop, session
from trainer.backends import horovod_common
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.schedule import current_rate


class TapeLoop:
    """One rank's model, optimizer, metrics and compiled train / eval steps."""

    def __init__(self, config: TrainerConfig, run: session.Plan) -> None:
        self.model = session.job_model(config, run)
        optimizer = session.make_optimizer(run)
        self.scaled = config.train.precision == "mixed_float16"
        self.optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer) if self.scaled else optimizer
        self.loss_fn = session.loss_function(config, "none", run.task)
        self.task = run.task
        self.compression = horovod_common.compression(config)
        self.sums = {name: tf.keras.metrics.Sum() for name in ("loss", "metric", "seen")}

    @tf.function(autograph=False)  # graph code as written: no rewriting from source at each start
    def train_step(self, images: tf.Tensor, labels: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            probabilities = self.model(images, training=True)
            per_example = self.loss_fn(labels, probabilities)
            # Horovod averages gradients over ranks, so the local mean equals the rule of the TensorFlow
            # distributed-training guide: summed per-example loss / global batch size, summed over ranks.
            loss = tf.reduce_sum(per_example) / tf.cast(tf.shape(labels)[0], tf.float32)
            objective = self.optimizer.get_scaled_loss(loss) if self.scaled else loss
        tape = hvd.DistributedGradientTape(tape, compression=self.compression)  # Horovod: averaged gradients
        gradients = tape.gradient(objective, self.model.trainable_variables)
        if self.scaled:
            gradients = self.optimizer.get_unscaled_gradients(gradients)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables))
        self._count(per_example, probabilities, labels)

    @tf.function(autograph=False)  # graph code as written: no rewriting from source at each start
    def eval_step(self, images: tf.Tensor, labels: tf.Tensor) -> None:
        probabilities = self.model(images, training=False)
        self._count(self.loss_fn(labels, probabilities), probabilities, labels)

    def _count(self, per_example: tf.Tensor, predicted: tf.Tensor, targets: tf.Tensor) -> None:
        self.sums["loss"].update_state(tf.reduce_sum(per_example))
        self.sums["metric"].update_state(tf.reduce_sum(session.task_values(self.task, predicted, targets)))
        self.sums["seen"].update_state(tf.cast(tf.shape(targets)[0], tf.float32))

    def collect(self, prefix: str) -> dict[str, float]:
        """Loss and the task's metric (accuracy, or mae) over every rank's examples since the last collect."""
        totals = horovod_common.average_over_ranks(  # Horovod: sums over ranks
            tf.stack([tf.cast(self.sums[n].result(), tf.float64) for n in ("loss", "metric", "seen")])).numpy()
        for summed in self.sums.values():
            summed.reset_state()
        metric = session.task_metric(self.task)
        return {f"{prefix}loss": totals[0] / totals[2], f"{prefix}{metric}": totals[1] / totals[2]}


def run_epoch(tape: TapeLoop, train_batches: Any, val_data: Any, run: session.Plan, first: bool) -> dict:
    """One epoch of training and validation; returns the averaged metrics with throughput."""
    start = time.perf_counter()
    for step in range(run.steps_per_epoch):
        tape.train_step(*next(train_batches))
        if first and step == 0:
            hvd.broadcast_variables(tape.model.variables, root_rank=0)  # Horovod: after the first step
            hvd.broadcast_variables(tape.optimizer.variables(), root_rank=0)  # Horovod: optimizer state too
    train_seconds = time.perf_counter() - start
    logs = tape.collect("")
    for images, labels in val_data:
        tape.eval_step(images, labels)
    logs.update(tape.collect("val_"))
    logs.update(images_per_sec=run.steps_per_epoch * run.global_batch / train_seconds,
                epoch_time=time.perf_counter() - start, learning_rate=current_rate(tape.optimizer))
    return logs


def input_data(config: TrainerConfig, run: session.Plan, rank: int, size: int) -> tuple[Any, Any]:
    """(an endless iterator of this rank's training batches, this rank's validation batches)."""
    train_params = config.train
    train_batches = iter(session.training_dataset(config, run, rank, size, train_params.batch_size,  # Horovod
                                                  hvd.local_size()))
    val_data = session.validation_dataset(config, run, train_params.batch_size, rank, size)  # Horovod: its part
    return train_batches, val_data


class HorovodTape(horovod_common.Horovod):
    """The custom loop on every rank; rank 0 reports and checkpoints every epoch and saves the model."""

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        self.tape = TapeLoop(config, run)
        return self.tape.model, self.tape.optimizer

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        train_batches, val_data = input_data(config, run, hvd.rank(), hvd.size())
        return loop.step_epochs(config, self, checkpoints, started, lambda epoch: run_epoch(
            self.tape, train_batches, val_data, run, first=epoch == started))


def train(config: TrainerConfig) -> None:
    loop.train(config, HorovodTape())
