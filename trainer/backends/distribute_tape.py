"""Backends `mirrored-tape` and `multiworker-tape`: the custom training loop of the TensorFlow distributed-training
guide under a tf.distribute strategy. Each replica runs the step (`strategy.run`) on its part of the global batch;
the loss is averaged over the global batch (`tf.nn.compute_average_loss`), so the strategy's summed gradients are
the global mean; loss and accuracy are sums kept per replica and added up across replicas (and workers) on read.
"""
from __future__ import annotations

import time
from typing import Any

import tensorflow as tf

from trainer import session
from trainer.backends.distribute import (
    agreed_start,
    is_lead,
    make_strategy,
    strategy_plan,
    task_of_this_process,
    train_input,
    worker_scratch,
)
from trainer.checkpoint_files import check_epochs_left, saved_epochs
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.data import rank_dataset
from trainer.models import build_model
from trainer.protocol import resumed_line
from trainer.schedule import current_rate

SUMS = ("loss", "correct", "seen")


class StrategyTapeLoop:
    """The model, optimizer and metric sums, created under the strategy, and the compiled replicated steps."""

    def __init__(self, config: TrainerConfig, run: session.Plan, strategy: tf.distribute.Strategy) -> None:
        self.strategy, self.global_batch = strategy, run.global_batch
        with strategy.scope():
            self.model = build_model(config.train.model, run.input_shape, run.manifest["num_classes"])
            optimizer = session.make_optimizer(run)
            self.scaled = config.train.precision == "mixed_float16"
            self.optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer) if self.scaled else optimizer
            self.sums = {name: tf.keras.metrics.Sum() for name in SUMS}  # summed across replicas on read
        self.loss_fn = session.loss_function("none")

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
        hits = tf.cast(tf.equal(tf.argmax(probabilities, -1, output_type=tf.int32), labels), tf.float32)
        for name, value in zip(SUMS, (tf.reduce_sum(per_example), tf.reduce_sum(hits), tf.size(labels))):
            self.sums[name].update_state(tf.cast(value, tf.float32))

    def collect(self) -> dict[str, float]:
        """Training loss and accuracy over every replica's examples since the last collect."""
        loss, correct, seen = (float(self.sums[name].result()) for name in SUMS)
        for metric in self.sums.values():
            metric.reset_state()
        return {"loss": loss / seen, "accuracy": correct / seen}


def validation(loop: StrategyTapeLoop, data: Any) -> dict[str, float]:
    """Loss and accuracy on the whole validation split, in this process (no collective: any worker may run it)."""
    loss_fn = session.loss_function("none")
    loss = correct = seen = 0.0
    for images, labels in data:
        probabilities = loop.model(images, training=False)
        loss += float(tf.reduce_sum(loss_fn(labels, probabilities)))
        correct += float(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(probabilities, -1, output_type=tf.int32), labels),
                                               tf.float32)))
        seen += int(tf.size(labels))
    return {"val_loss": loss / seen, "val_accuracy": correct / seen}


def run_epoch(loop: StrategyTapeLoop, batches: Any, val_data: Any, run: session.Plan) -> dict:
    start = time.perf_counter()
    for _ in range(run.steps_per_epoch):
        loop.train_step(batches)
    train_seconds = time.perf_counter() - start
    logs = loop.collect() | validation(loop, val_data)
    return logs | {"images_per_sec": run.steps_per_epoch * run.global_batch / train_seconds,
                   "epoch_time": time.perf_counter() - start, "learning_rate": current_rate(loop.optimizer)}


def train_epochs(config: TrainerConfig, loop: StrategyTapeLoop, run: session.Plan, checkpoints: Checkpoints,
                 started: int, lead: bool) -> dict[str, list[float]]:
    """The epochs from `started` on, each checkpointed; the lead reports each epoch's metrics before its
    checkpoint (a resume never skips an unlogged epoch). Returns the history."""
    from trainer.metrics_sink import metric_sink
    batches = iter(loop.strategy.distribute_datasets_from_function(train_input(config, run)))
    val_data = rank_dataset(config.job.data_dir, run.manifest, "validation", batch_size=run.global_batch,
                            input_shape=run.input_shape)
    sink = metric_sink(config.job) if lead else None
    writer = tf.summary.create_file_writer(str(session.tensorboard_dir(config))) \
        if lead and config.train.tensorboard else None
    history: dict[str, list[float]] = {}
    for epoch in range(started, config.train.epochs):
        logs = run_epoch(loop, batches, val_data, run)
        for key, value in logs.items():
            history.setdefault(key, []).append(float(value))
        if lead:
            session.report_epoch(epoch, logs, sink, writer)
        checkpoints.save(epoch + 1)
    return history


def train(config: TrainerConfig) -> None:
    """Train with the custom loop; every process checkpoints (the lead keeps them) and the lead saves the model."""
    job = config.job
    session.set_precision(config)
    strategy = make_strategy(config)
    task_type, task_index = task_of_this_process()
    tf.keras.utils.set_random_seed(config.train.seed + task_index)
    run = strategy_plan(config, strategy)
    loop = StrategyTapeLoop(config, run, strategy)
    lead = is_lead(strategy)
    with worker_scratch(lead) as scratch:
        checkpoints = Checkpoints(job.checkpoint_dir, loop.model, loop.optimizer, config.train.keep_checkpoints,
                                  job.checkpoint_owner, save_dir=scratch and scratch / "checkpoints")
        started = agreed_start(strategy, saved_epochs(job.checkpoint_dir))  # agreed before anyone restores
        checkpoints.restore_latest()
        check_epochs_left(started, config.train.epochs)
        if started and lead:
            print(resumed_line(started), flush=True)
        history = train_epochs(config, loop, run, checkpoints, started, lead)
        session.print_weights_digest(loop.model, f"task={task_type}:{task_index}")
        session.save_results(config, loop.model, run, history, scratch / "model" if scratch else job.out_dir,
                             started)
