"""tf.distribute backends through Keras fit: mirrored, central-storage, one-device, multiworker, parameter-server.

Single-process strategies use all local GPUs, or `replicas` logical CPU devices when there is no GPU.
Multi-process ones read their cluster from TF_CONFIG (the launching task writes it).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
import tensorflow as tf

from trainer import session
from trainer.callbacks import CheckpointEveryEpoch
from trainer.checkpoints import Checkpoints
from trainer.config import TrainConfig
from trainer.data import rank_dataset, rank_record_count
from trainer.models import build_model


def local_devices(count: int) -> list[str]:
    """All local GPUs, else `count` logical CPUs (configured before TensorFlow starts its runtime)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return [f"/gpu:{i}" for i in range(len(gpus))]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(1, count))
    return [f"/cpu:{i}" for i in range(max(1, count))]


def make_strategy(config: TrainConfig) -> tf.distribute.Strategy:
    if config.backend == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if config.backend == "parameter-server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.experimental.ParameterServerStrategy(resolver)
    devices = local_devices(config.replicas)
    if config.backend == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if config.backend == "central-storage":
        return tf.distribute.experimental.CentralStorageStrategy(devices, parameter_device="/cpu:0")
    return tf.distribute.OneDeviceStrategy(devices[0])


def task_of_this_process() -> tuple[str, int]:
    """(task type, index) from TF_CONFIG; ('chief', 0) when there is none."""
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type", "chief"), int(task.get("index", 0))


def is_lead(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes results: the chief, or worker 0 when there is no chief."""
    task_type, index = task_of_this_process()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return task_type == "chief" or (task_type == "worker" and index == 0)
    return True


def train_input(config: TrainConfig, run: session.Plan) -> tf.keras.utils.experimental.DatasetCreator:
    """Each input pipeline reads its own shards, batched per replica."""
    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return rank_dataset(config.data_dir, run.manifest, "train", rank=context.input_pipeline_id,
                            size=context.num_input_pipelines, training=True,
                            batch_size=context.get_per_replica_batch_size(run.global_batch),
                            seed=config.seed + context.input_pipeline_id, input_shape=run.input_shape,
                            augmented=config.augmented, cache=config.cache)
    return tf.keras.utils.experimental.DatasetCreator(dataset_fn)


def compiled_model(config: TrainConfig, run: session.Plan, strategy: tf.distribute.Strategy) -> tf.keras.Model:
    with strategy.scope():
        model = build_model(config.model, run.input_shape, run.manifest["num_classes"])
        model.compile(optimizer=session.make_optimizer(run), loss=session.loss_function(), metrics=["accuracy"],
                      jit_compile=config.jit_compile, steps_per_execution=config.steps_per_execution)
    return model


def train(config: TrainConfig) -> None:
    """Train under the configured strategy; the lead process checkpoints and saves the model."""
    session.set_precision(config)
    strategy = make_strategy(config)
    tf.keras.utils.set_random_seed(config.seed + task_of_this_process()[1])
    run = session.plan(config, replicas=strategy.num_replicas_in_sync)
    model = compiled_model(config, run, strategy)
    lead = is_lead(strategy)
    checkpoints = Checkpoints(config.checkpoints, model, model.optimizer, config.keep_checkpoints,
                              save_dir=None if lead else Path(tempfile.mkdtemp()))  # all save; only the lead keeps
    started = checkpoints.restore_latest() if config.resume else 0
    if started and lead:
        print(f"resuming from checkpoint at epoch {started}", flush=True)
    callbacks = [CheckpointEveryEpoch(checkpoints)] + (session.reporting_callbacks(config, run) if lead else [])
    validation = {}
    if config.backend != "parameter-server":  # evaluation runs on the coordinator's workers otherwise
        validation["validation_data"] = rank_dataset(config.data_dir, run.manifest, "validation",
                                                     batch_size=run.global_batch, input_shape=run.input_shape)
        validation["validation_steps"] = math.ceil(rank_record_count(run.manifest, "validation", 0, 1)
                                                   / run.global_batch)  # needed with steps_per_execution > 1
    history = model.fit(train_input(config, run), epochs=config.epochs, initial_epoch=started,
                        steps_per_epoch=run.steps_per_epoch, verbose=0, callbacks=callbacks, **validation)
    if config.print_weights_digest:
        task_type, index = task_of_this_process()
        print(f"weights_sha256 task={task_type}:{index} {session.weights_digest(model)}", flush=True)
    out_dir = config.out_dir if lead else Path(tempfile.mkdtemp())  # every worker saves; only the lead keeps it
    session.save_results(config, model, run, history.history, out_dir, started)
