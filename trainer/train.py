"""One Horovod rank's training: data, model, DistributedOptimizer, callbacks; side effects on rank 0."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

from trainer.callbacks import CheckpointEveryEpoch, EpochReport, MetricAverage, Throughput
from trainer.data import model_input_shape, rank_dataset, rank_record_count
from trainer.model_io import save_model
from trainer.models import build_model
from trainer.records import read_manifest
from trainer.tracking import mlflow_metric_sink

@dataclass(frozen=True)
class TrainConfig:
    """What one rank needs to train; built from the command line."""
    data_dir: Path
    out_dir: Path
    model: str
    epochs: int
    batch_size: int
    learning_rate: float
    scale_lr: bool
    seed: int
    keep_checkpoints: int
    image_size: int | None = None
    augmented: bool = False
    cache: bool = True
    print_weights_digest: bool = False


def configure_devices() -> None:
    """Pin one GPU per rank; on CPU share the cores between the ranks of this host."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")  # Horovod: one GPU per rank
        return
    threads = max(1, (os.cpu_count() or 1) // hvd.local_size())  # Horovod: ranks on this host share the cores
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def weights_digest(model: tf.keras.Model) -> str:
    """sha256 over all weights, to compare ranks."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def compiled_model(config: TrainConfig, manifest: dict) -> tuple[tf.keras.Model, float]:
    """The model compiled with a DistributedOptimizer at the scaled learning rate."""
    model = build_model(config.model, model_input_shape(manifest, config.image_size), manifest["num_classes"])
    learning_rate = config.learning_rate * (hvd.size() if config.scale_lr else 1)  # Horovod: linear LR scaling
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(learning_rate))  # Horovod: averaged gradients
    model.compile(optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                  metrics=["accuracy"])
    return model, learning_rate


def callbacks_for(config: TrainConfig, manifest: dict, steps_per_epoch: int) -> list:
    """Callbacks every rank runs, then rank 0's reporting and checkpointing."""
    val_records = rank_record_count(manifest, "validation", hvd.rank(), hvd.size())  # Horovod: this rank's share
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # Horovod: start all ranks from rank 0's weights
        MetricAverage(lambda t: hvd_tf.allreduce(t, op=hvd_tf.Sum), val_records),  # Horovod: average over ranks
        Throughput(steps_per_epoch * config.batch_size * hvd.size()),  # Horovod: global images
    ]
    if hvd.rank() == 0:  # Horovod: side effects on rank 0 only
        callbacks += [EpochReport(mlflow_metric_sink()),
                      CheckpointEveryEpoch(config.out_dir / "checkpoints", config.keep_checkpoints)]
    return callbacks


def save_results(config: TrainConfig, model: tf.keras.Model, manifest: dict, summary: dict) -> None:
    """Rank 0: the final model (spec + weights) and the training summary."""
    spec = {"model": config.model, "input_shape": list(model_input_shape(manifest, config.image_size)),
            "num_classes": manifest["num_classes"], "classes": manifest["classes"]}
    save_model(model, spec, config.out_dir)
    summary["config"] = {key: str(value) for key, value in asdict(config).items()}
    (config.out_dir / "train_summary.json").write_text(json.dumps(summary, indent=2))


def train(config: TrainConfig) -> None:
    """Train on this rank's shards; rank 0 writes checkpoints, the final model and a summary."""
    hvd.init()  # Horovod: join the ranks
    configure_devices()
    rank, size = hvd.rank(), hvd.size()  # Horovod: this process's place among the ranks
    tf.keras.utils.set_random_seed(config.seed + rank)  # Horovod: distinct init, dropout, shuffling per rank
    manifest = read_manifest(config.data_dir)
    global_batch = config.batch_size * size  # Horovod: batch_size is per rank
    steps_per_epoch = max(1, manifest["splits"]["train"]["count"] // global_batch)
    model, learning_rate = compiled_model(config, manifest)
    input_shape = model_input_shape(manifest, config.image_size)
    train_data = rank_dataset(config.data_dir, manifest, "train", rank=rank, size=size,  # Horovod: own part
                              batch_size=config.batch_size, training=True, seed=config.seed + rank,
                              input_shape=input_shape, augmented=config.augmented, cache=config.cache)
    val_data = rank_dataset(config.data_dir, manifest, "validation", rank=rank, size=size,  # Horovod: own part
                            batch_size=config.batch_size, input_shape=input_shape)
    history = model.fit(train_data, steps_per_epoch=steps_per_epoch, epochs=config.epochs, verbose=0,
                        validation_data=val_data, callbacks=callbacks_for(config, manifest, steps_per_epoch))
    if config.print_weights_digest:
        print(f"weights_sha256 rank={rank} {weights_digest(model)}", flush=True)  # Horovod: every rank reports
    if rank == 0:  # Horovod: only rank 0 writes the result
        summary = {"world_size": size, "global_batch_size": global_batch, "steps_per_epoch": steps_per_epoch,
                   "learning_rate": learning_rate,
                   "history": {key: [float(x) for x in values] for key, values in history.history.items()}}
        save_results(config, model, manifest, summary)
