"""Backends `mirrored-tape` and `multiworker-tape`: the custom training loop of the TensorFlow distributed-training
guide under a tf.distribute strategy. Each replica runs the step (`strategy.run`) on its part of the global batch;
the loss is averaged over the global batch (`tf.nn.compute_average_loss`), so the strategy's summed gradients are
the global mean; loss and accuracy are sums kept per replica and added up across replicas (and workers) on read.
"""
from __future__ import annotations

import time
from typing import Any

import tensorflow as tf

from trainer import loop, session
from trainer.backends.distribute import Distribute, train_input
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.schedule import current_rate

SUMS = ("loss", "metric", "seen")


class StrategyTapeLoop:
    """The model, optimizer and metric sums, created under the strategy, and the compiled replicated steps."""

    def __init__(self, config: TrainerConfig, run: session.Plan, strategy: tf.distribute.Strategy) -> None:
        self.strategy, self.global_batch = strategy, run.global_batch
        with strategy.scope():
            self.model = session.job_model(config, run)
            optimizer = session.make_optimizer(run)
            self.scaled = config.train.precision == "mixed_float16"
            self.optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer) if self.scaled else optimizer
            self.sums = {name: tf.keras.metrics.Sum() for name in SUMS}  # summed across replicas on read
        self.loss_fn = session.loss_function(config, "none", run.task)
        self.task = run.task

    @tf.function(autograph=False)  # graph code as written: no rewriting from source at each start
    def train_step(self, batches: Any) -> None:
        self.strategy.run(self._replica_step, args=next(batches))

    def _replica_step(self, images: tf.Tensor, labels: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            probabilities = self.model(images, training=True)
            per_example = self.loss_fn(labels, probabilities)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
            objective = self.optimizer.get_scaled_loss(loss) if self.scaled else loss
        gradients = tape.gradient(objective, self.model.trainable_variables)
        if self.scaled:
            gradients = self.optimizer.get_unscaled_gradients(gradients)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables))  # summed over replicas
        values = session.task_values(self.task, probabilities, labels)
        for name, value in zip(SUMS, (tf.reduce_sum(per_example), tf.reduce_sum(values), tf.shape(labels)[0])):
            self.sums[name].update_state(tf.cast(value, tf.float32))

    def collect(self) -> dict[str, float]:
        """Training loss and the task's metric (accuracy, or mae) over every replica's examples since the last
        collect."""
        loss, total, seen = (float(self.sums[name].result()) for name in SUMS)
        for metric in self.sums.values():
            metric.reset_state()
        return {"loss": loss / seen, session.task_metric(self.task): total / seen}


def validation(tape: StrategyTapeLoop, data: Any) -> dict[str, float]:
    """Loss and the task's metric on the whole validation split, in this process (no collective: any worker may
    run it)."""
    loss = total = seen = 0.0
    for images, labels in data:
        predicted = tape.model(images, training=False)
        loss += float(tf.reduce_sum(tape.loss_fn(labels, predicted)))
        total += float(tf.reduce_sum(session.task_values(tape.task, predicted, labels)))
        seen += int(tf.shape(labels)[0])
    return {"val_loss": loss / seen, f"val_{session.task_metric(tape.task)}": total / seen}


def run_epoch(tape: StrategyTapeLoop, batches: Any, val_data: Any, run: session.Plan) -> dict:
    start = time.perf_counter()
    for _ in range(run.steps_per_epoch):
        tape.train_step(batches)
    train_seconds = time.perf_counter() - start
    logs = tape.collect() | validation(tape, val_data)
    return logs | {"images_per_sec": run.steps_per_epoch * run.global_batch / train_seconds,
                   "epoch_time": time.perf_counter() - start, "learning_rate": current_rate(tape.optimizer)}


class DistributeTape(Distribute):
    """The custom loop under the backend's strategy; every process checkpoints (the lead's are kept), the lead
    reports and its model is kept."""

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        self.tape = StrategyTapeLoop(config, run, self.strategy)
        return self.tape.model, self.tape.optimizer

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        batches = iter(self.strategy.distribute_datasets_from_function(train_input(config, run)))
        val_data = session.validation_dataset(config, run, run.global_batch)
        return loop.step_epochs(config, self, checkpoints, started,
                                lambda epoch: run_epoch(self.tape, batches, val_data, run))


def train(config: TrainerConfig) -> None:
    loop.train(config, DistributeTape())
