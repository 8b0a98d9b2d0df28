"""What every backend shares: the data's shapes and counts, the optimizer, callbacks and the saved result."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from trainer.backend_specs import backend_spec
from trainer.callbacks import EpochReport, Throughput
from trainer.config import IMPORT_PATH, TrainerConfig
from trainer.data import cache_in_memory, model_input_shape, value_bytes_of
from trainer.metrics_sink import metric_sink
from trainer.model_io import save_model, source_in, write_train_summary
from trainer.model_outputs import write_model_outputs
from trainer.models import ModelCodeError, build_model, user_function
from trainer.prepared_data import data_task, output_size, read_manifest
from trainer.protocol import epoch_line, weights_line
from trainer.schedule import WarmupSchedule, scaled_rates
from trainer.sharding import TrainingPlan, training_plan
from trainer.stop_notice import deferred
from trainer.tuning import GRADIENT_KEY, rank_threads, usable_cores


@dataclass(frozen=True)
class Plan:
    """Sizes of one training run for a given number of replicas."""
    manifest: dict
    input_shape: tuple[int, ...]
    replicas: int
    global_batch: int
    data: TrainingPlan  # each input pipeline's records, batches and drops per epoch
    steps_per_epoch: int
    learning_rate: tuple[float, float]  # (warmup start, target)
    warmup_steps: int
    task: str = "classification"  # train.task resolved against the data: classification | regression

    @property
    def outputs(self) -> int:
        """What the model's last axis holds: the class count or the number of targets."""
        return output_size(self.manifest, self.task)


def local_gpu_count() -> int:
    """The GPUs this host has (what the backend's spec counts replicas from)."""
    return len(tf.config.list_physical_devices("GPU"))


def plan(config: TrainerConfig, processes: int, gpus_per_host: int | None = None) -> Plan:
    """Global batch, each input pipeline's share of the data, steps per epoch and the scaled learning rate, for
    `processes` (Horovod ranks or tf.distribute workers: the job's np, or an elastic ring's current size) on hosts
    with `gpus_per_host` GPUs (None: this host's), as the backend's spec counts replicas and input pipelines."""
    train = config.train
    spec = backend_spec(train.backend)
    gpus = local_gpu_count() if gpus_per_host is None else gpus_per_host
    manifest = read_manifest(config.job.data_dir)
    replicas, global_batch = spec.replicas(processes, gpus), spec.global_batch(train.batch_size, processes, gpus)
    data = training_plan(manifest, *spec.pipeline_batches(train.batch_size, processes, gpus), train.seed)
    steps = max(1, data.steps_per_epoch)
    rates = scaled_rates(train.learning_rate, replicas, train.scale_lr)
    return Plan(manifest, model_input_shape(manifest, config.input.image_size), replicas, global_batch, data,
                steps, rates, round(train.warmup_epochs * steps), data_task(manifest, train.task))


def training_dataset(config: TrainerConfig, run: Plan, rank: int, size: int, batch_size: int,
                     local_processes: int = 1) -> tf.data.Dataset:
    """This input pipeline's endless training batches: its share, cached when it fits, shuffled, augmented, in a
    tf.data thread pool of this process's share of the host's cores."""
    import psutil

    from trainer.data import rank_dataset
    records = run.data.records[rank] if len(run.data.records) == size else run.data.records[0]
    cache = cache_in_memory(config.input.cache, records, run.input_shape, psutil.virtual_memory().available,
                            local_processes, value_bytes_of(run.manifest))
    batches = rank_dataset(config.job.data_dir, run.manifest, "train", rank=rank, size=size, batch_size=batch_size,
                           training=True, seed=config.train.seed + rank, shard_seed=config.train.seed,
                           input_shape=run.input_shape, augment_ops=augment_ops(config), cache=cache, task=run.task)
    options = tf.data.Options()
    options.threading.private_threadpool_size = rank_threads(config.train, usable_cores(), local_processes).data
    return batches.with_options(options)


def validation_dataset(config: TrainerConfig, run: Plan, batch_size: int, rank: int = 0, size: int = 1) -> Any:
    """This process's part of the validation split (all of it when alone), read once per evaluation."""
    from trainer.data import rank_dataset
    return rank_dataset(config.job.data_dir, run.manifest, "validation", rank=rank, size=size, batch_size=batch_size,
                        input_shape=run.input_shape, task=run.task)


_HELD_INPUTS: list[Any] = []  # until the process ends (not the model's: a model may be freed before that)


def hold_training_input(model: tf.keras.Model) -> None:
    """Keep model.fit's training iterator until the process ends, which it does without deleting it (os._exit):
    deleting a live iterator waits for tf.data's autotuning thread to finish its round (0.6 s alone here, 5-15 s
    measured beside two ranks on two cores, at the end of every training)."""
    if isinstance(model.distribute_strategy, tf.distribute.experimental.ParameterServerStrategy):
        return  # its iterators are the workers' (the coordinator schedules the steps), not this process's
    train_step = model.make_train_function()

    def train_function(iterator: Any) -> Any:
        if not any(held is iterator for held in _HELD_INPUTS):
            _HELD_INPUTS.append(iterator)  # fit makes one iterator of the endless training dataset
        return train_step(iterator)

    model.train_function = train_function


def augment_ops(config: TrainerConfig) -> tuple[str, ...]:
    """The training distortions of this job: input.augment_ops when augmentation is on, none otherwise."""
    return tuple(config.input.augment_ops) if config.job.augment else ()


def set_precision(config: TrainerConfig) -> None:
    """Mixed precision policy (the models keep a float32 output layer)."""
    precision = config.train.precision
    tf.keras.mixed_precision.set_global_policy("float32" if precision == "fp32" else precision)


def make_optimizer(run: Plan) -> tf.keras.optimizers.Optimizer:
    """Adam on the warmup-then-constant schedule of the plan."""
    return tf.keras.optimizers.legacy.Adam(WarmupSchedule(*run.learning_rate, run.warmup_steps))


def loss_function(config: TrainerConfig, reduction: str = "auto", task: str = "classification") -> Any:
    """train.loss: the task's (classification: sparse categorical crossentropy on probabilities; regression: mean
    squared error), a Keras loss by name, or the user's function (y_true, y_pred) -> a loss per example; per
    example when reduction is "none" (the custom loops average it over the global batch)."""
    name = config.train.loss
    none = reduction == "none"
    if name is None:
        kind = tf.keras.losses.MeanSquaredError if task == "regression" else \
            tf.keras.losses.SparseCategoricalCrossentropy
        return kind(reduction=tf.keras.losses.Reduction.NONE if none else tf.keras.losses.Reduction.AUTO)
    if IMPORT_PATH.fullmatch(name):
        return user_function(name, config.job.loss_source)  # a function: no reduction of its own
    try:
        loss = tf.keras.losses.get(name)
    except ValueError:
        raise ModelCodeError(f"train.loss {name!r} is no Keras loss") from None
    if isinstance(loss, tf.keras.losses.Loss) and none:
        loss.reduction = tf.keras.losses.Reduction.NONE
    return loss


def job_model(config: TrainerConfig, run: Plan) -> tf.keras.Model:
    """The model the job trains (the catalog's, or the user's from the job's copy of their file)."""
    return build_model(config.train.model, run.input_shape, run.outputs, config.train.model_args,
                       config.job.model_source)


def task_metric(task: str) -> str:
    """The metric of a task each epoch reports (beside the loss): accuracy, or the mean absolute error."""
    return "mae" if task == "regression" else "accuracy"


def task_values(task: str, predicted: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Per example, what task_metric averages: 1.0 for a right class, or the mean absolute error over the targets
    (the custom loops sum it, then divide by the examples seen)."""
    if task == "regression":
        return tf.reduce_mean(tf.abs(tf.cast(predicted, tf.float32) - tf.cast(targets, tf.float32)), axis=-1)
    return tf.cast(tf.equal(tf.argmax(predicted, -1, output_type=tf.int32), targets), tf.float32)


ON_CLASS_IDS = {"categorical_accuracy": "sparse_categorical_accuracy",  # compile maps only accuracy, crossentropy
                "top_k_categorical_accuracy": "sparse_top_k_categorical_accuracy",
                "categorical_crossentropy": "sparse_categorical_crossentropy"}


def compile_options(config: TrainerConfig, run: Plan) -> dict[str, Any]:
    """model.compile's loss and metrics for the job's task (and train.metrics; a classifier's on class ids)."""
    metrics = [ON_CLASS_IDS.get(name, name) if run.task == "classification" else name
               for name in config.train.metrics]
    return {"loss": loss_function(config, task=run.task),
            "metrics": list(dict.fromkeys([task_metric(run.task), *metrics]))}


def tensorboard_dir(config: TrainerConfig) -> Path:
    return config.job.out_dir / "tensorboard"


def reporting_callbacks(config: TrainerConfig, run: Plan) -> list[tf.keras.callbacks.Callback]:
    """The reporting side of one process that speaks for all: throughput, MLflow, TensorBoard."""
    callbacks: list[tf.keras.callbacks.Callback] = [Throughput(run.steps_per_epoch * run.global_batch),
                                                     EpochReport(metric_sink(config.job))]
    if config.train.tensorboard:
        callbacks.append(tf.keras.callbacks.TensorBoard(str(tensorboard_dir(config)), profile_batch=0))
    return callbacks


def report_epoch(epoch: int, logs: dict, sink: Any, writer: Any) -> None:
    """The reporting process of a custom loop: one printed line, MLflow, TensorBoard (a stop signal waits)."""
    with deferred():
        print(epoch_line(epoch, logs), flush=True)
        if sink is not None:
            sink(epoch, logs)
    if writer is not None:
        with writer.as_default(step=epoch):
            for key, value in logs.items():
                tf.summary.scalar(key, value)


def weights_digest(model: tf.keras.Model) -> str:
    """sha256 over all weights, to compare processes and the saved model."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def print_weights_digest(model: tf.keras.Model, who: str) -> None:
    """One line per process at the end: the digest of its weights (all equal for synchronous training)."""
    print(weights_line(who, weights_digest(model)), flush=True)


def gradient_bytes(model: tf.keras.Model) -> int:
    """The size of one step's gradients: the model's trainable weights."""
    return int(sum(weight.shape.num_elements() * weight.dtype.size for weight in model.trainable_weights))


def save_results(config: TrainerConfig, model: tf.keras.Model, run: Plan, history: dict, out_dir: Path,
                 started_epoch: int, communication: dict[str, float] | None = None,
                 tuned: dict[str, Any] | None = None) -> None:
    """The final model (spec + weights), what the steps after the training read (when the job asks for it), and
    last a summary of the run (the mark of a finished training; with the averaging's share of a step when it was
    measured, the model's gradient size and what the process applied of the job's tuning), into out_dir."""
    spec = {"model": config.train.model, "model_args": config.train.model_args, "input_shape": list(run.input_shape),
            "num_classes": run.manifest["num_classes"], "classes": run.manifest["classes"], "task": run.task,
            "outputs": run.outputs,
            "model_source": source_in(config.job.model_source, config.job.out_dir)}
    save_model(model, spec, out_dir)
    if out_dir == config.job.out_dir and config.job.model_outputs:  # the lead's copy, for the steps after training
        write_model_outputs(out_dir, config.job.data_dir, run.manifest)
    summary = {"backend": config.train.backend, "world_size": run.replicas, "global_batch_size": run.global_batch,
               "steps_per_epoch": run.steps_per_epoch, "learning_rate": run.learning_rate[1],
               "warmup_start_learning_rate": run.learning_rate[0], "warmup_steps": run.warmup_steps,
               "resumed_from_epoch": started_epoch, "precision": config.train.precision,
               "records_per_rank": list(run.data.records), "dropped_per_rank": list(run.data.dropped),
               "history": {key: [float(x) for x in values] for key, values in history.items()},
               "tuning": (tuned or {}) | {GRADIENT_KEY: gradient_bytes(model)}}
    if communication:
        summary["communication"] = communication
    write_train_summary(summary, out_dir)
