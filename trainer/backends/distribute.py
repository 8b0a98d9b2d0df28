"""tf.distribute backends through Keras fit: mirrored, central-storage, one-device, multiworker, parameter-server
(and the strategies and input the custom-loop variants in distribute_tape.py share).

Single-process strategies use all local GPUs, or `train.np` logical CPU devices when there is no GPU.
Multi-process ones read their cluster from TF_CONFIG (the launching task writes it).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import tensorflow as tf

from trainer import loop, session
from trainer.backend_specs import backend_spec
from trainer.backends import data_service
from trainer.backends.task_devices import COMPUTING, pin_task_gpu
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.data import rank_record_count, service_dataset


def local_devices(count: int) -> list[str]:
    """All local GPUs, else `count` logical CPUs (configured before TensorFlow starts its runtime)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return [f"/gpu:{i}" for i in range(len(gpus))]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(1, count))
    return [f"/cpu:{i}" for i in range(max(1, count))]


def make_strategy(config: TrainerConfig) -> tf.distribute.Strategy:
    """The backend's strategy (the custom-loop variants use the same ones)."""
    strategy = backend_spec(config.train.backend).replication  # the strategy's name
    if strategy in COMPUTING:
        pin_task_gpu(strategy)  # one GPU per worker on its host, as Horovod pins one per rank
    if strategy == "MultiWorkerMirroredStrategy":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if strategy == "ParameterServerStrategy":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.experimental.ParameterServerStrategy(resolver)
    devices = local_devices(config.train.np)
    if strategy == "MirroredStrategy":
        return tf.distribute.MirroredStrategy(devices)
    if strategy == "CentralStorageStrategy":
        return tf.distribute.experimental.CentralStorageStrategy(devices, parameter_device="/cpu:0")
    return tf.distribute.OneDeviceStrategy(devices[0])


def strategy_plan(config: TrainerConfig, strategy: tf.distribute.Strategy) -> session.Plan:
    """The plan as the backend's spec counts it, checked against the replicas the strategy really has (a host
    whose GPUs differ from what the spec was told would otherwise train another global batch than logged)."""
    run = session.plan(config, processes=config.train.np)
    if strategy.num_replicas_in_sync != run.replicas:
        raise RuntimeError(f"backend {config.train.backend}: the strategy has {strategy.num_replicas_in_sync} "
                           f"replicas in sync, the plan {run.replicas} (GPUs per host: {session.local_gpu_count()})")
    return run


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


class WorkersDisagreeError(RuntimeError):
    """The workers found different epochs in their checkpoints: they do not see the same checkpoint directory."""


def agreed_start(strategy: tf.distribute.Strategy, started: int) -> int:
    """The epoch every worker resumes from, checked across workers before any restores: each reads its own copy of
    the checkpoints, and training on from different epochs would silently mix models."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return started

    @tf.function(autograph=False)  # graph code as written: no rewriting from source at each start
    def sums() -> tuple[tf.Tensor, tf.Tensor]:
        values = strategy.run(lambda: (tf.constant(started, tf.int64), tf.constant(1, tf.int64)))
        return tuple(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) for value in values)
    total, replicas = (int(value) for value in sums())
    if total != started * replicas:
        raise WorkersDisagreeError(f"the workers found different epochs (this one {started}, the mean "
                                   f"{total / replicas:g}): every worker must see the run's checkpoint directory")
    return started


def train_input(config: TrainerConfig, run: session.Plan) -> tf.keras.utils.experimental.DatasetCreator:
    """Each input pipeline reads its own share, batched per replica. Parameter-server workers: the coordinator
    traces one dataset function for all of them (it sees pipeline 0 of 1), so they read through the tf.data
    service, which gives each its own part of every epoch."""
    if backend_spec(config.train.backend).with_servers:
        dispatcher = data_service.start_dispatcher()

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            return service_dataset(config.job.data_dir, run.manifest, dispatcher=dispatcher,
                                   job_name=data_service.JOB_NAME, seed=config.train.seed, input_shape=run.input_shape,
                                   batch_size=context.get_per_replica_batch_size(run.global_batch),
                                   augment_ops=session.augment_ops(config), task=run.task)
    else:
        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            return session.training_dataset(config, run, context.input_pipeline_id, context.num_input_pipelines,
                                            context.get_per_replica_batch_size(run.global_batch))
    return tf.keras.utils.experimental.DatasetCreator(dataset_fn)


def compiled_model(config: TrainerConfig, run: session.Plan, strategy: tf.distribute.Strategy) -> tf.keras.Model:
    with strategy.scope():
        model = session.job_model(config, run)
        model.compile(optimizer=session.make_optimizer(run), **session.compile_options(config, run),
                      jit_compile=config.train.jit_compile, steps_per_execution=config.train.steps_per_execution)
    return model


def validation_args(config: TrainerConfig, run: session.Plan) -> dict:
    """fit's validation arguments: the whole validation split (none for parameter-server, whose evaluation would
    run on the coordinator's workers)."""
    if backend_spec(config.train.backend).with_servers:
        return {}
    records = rank_record_count(run.manifest, "validation", 0, 1)
    return {"validation_data": session.validation_dataset(config, run, run.global_batch),
            "validation_steps": math.ceil(records / run.global_batch)}  # needed with steps_per_execution > 1


class Distribute(loop.Backend):
    """Keras fit under the backend's strategy; every process checkpoints and saves (the collectives need all of
    them), the lead's copies are kept and the lead reports."""
    every_process_saves = True

    def start(self, config: TrainerConfig) -> dict[str, Any]:
        self.strategy = make_strategy(config)
        self.task_type, self.task_index = task_of_this_process()
        tf.keras.utils.set_random_seed(config.train.seed + self.task_index)
        return {}

    def lead(self) -> bool:
        return is_lead(self.strategy)

    def who(self) -> str:
        return f"task={self.task_type}:{self.task_index}"

    def plan(self, config: TrainerConfig) -> session.Plan:
        return strategy_plan(config, self.strategy)

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        model = compiled_model(config, run, self.strategy)
        return model, model.optimizer

    def agree(self, epochs_done: int) -> int:
        return agreed_start(self.strategy, epochs_done)

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        inputs = {"x": train_input(config, run), "steps_per_epoch": run.steps_per_epoch,
                  **validation_args(config, run)}
        return loop.fit_epochs(config, run, self, model, checkpoints, started, inputs)


def train(config: TrainerConfig) -> None:
    loop.train(config, Distribute())
