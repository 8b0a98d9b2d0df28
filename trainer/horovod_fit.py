"""Backend `horovod`: Keras fit with hvd.DistributedOptimizer, broadcast from rank 0, own metric averaging."""
from __future__ import annotations

import math

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import tensorflow as tf

from trainer import horovod_common, session
from trainer.callbacks import CheckpointEveryEpoch, MetricAverage
from trainer.checkpoints import Checkpoints
from trainer.config import TrainConfig
from trainer.data import rank_dataset, rank_record_count
from trainer.models import build_model


def compiled_model(config: TrainConfig, run: session.Plan) -> tf.keras.Model:
    """The model compiled with a DistributedOptimizer on the scaled, warmed-up learning rate."""
    model = build_model(config.model, run.input_shape, run.manifest["num_classes"])
    optimizer = hvd.DistributedOptimizer(session.make_optimizer(run),  # Horovod: averaged gradients
                                         compression=horovod_common.compression(config))
    model.compile(optimizer=optimizer, loss=session.loss_function(), metrics=["accuracy"],
                  steps_per_execution=config.steps_per_execution)
    return model


def callbacks(config: TrainConfig, run: session.Plan, rank: int, size: int, checkpoints: Checkpoints) -> list:
    """Callbacks every rank runs, then rank 0's checkpointing and reporting."""
    val_records = rank_record_count(run.manifest, "validation", rank, size)  # Horovod: this rank's share
    every_rank = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # Horovod: rank 0's weights everywhere
                  MetricAverage(horovod_common.average_over_ranks, val_records)]  # Horovod: average metrics
    if rank != 0:  # Horovod: only rank 0 checkpoints and reports
        return every_rank
    return every_rank + [CheckpointEveryEpoch(checkpoints)] + session.reporting_callbacks(config, run)


def train(config: TrainConfig) -> None:
    """Train this rank's part; rank 0 saves checkpoints every epoch and the final model."""
    rank, size = horovod_common.start(config)
    session.set_precision(config)
    run = session.plan(config, replicas=size)  # Horovod: one replica per rank
    model = compiled_model(config, run)
    checkpoints = Checkpoints(config.checkpoints, model, model.optimizer, config.keep_checkpoints)
    started = horovod_common.resume(config, checkpoints)
    hvd_tf.broadcast_variables(model.variables, root_rank=0)  # Horovod: same start even with many steps per call
    train_data = rank_dataset(config.data_dir, run.manifest, "train", rank=rank, size=size,  # Horovod: own part
                              batch_size=config.batch_size, training=True, seed=config.seed + rank,
                              input_shape=run.input_shape, augmented=config.augmented, cache=config.cache)
    val_data = rank_dataset(config.data_dir, run.manifest, "validation", rank=rank, size=size,  # Horovod: own part
                            batch_size=config.batch_size, input_shape=run.input_shape)
    val_steps = math.ceil(rank_record_count(run.manifest, "validation", rank, size) / config.batch_size)  # Horovod
    history = model.fit(train_data, steps_per_epoch=run.steps_per_epoch, epochs=config.epochs,
                        initial_epoch=started, verbose=0, validation_data=val_data, validation_steps=val_steps,
                        callbacks=callbacks(config, run, rank, size, checkpoints))
    if config.print_weights_digest:
        print(f"weights_sha256 rank={rank} {session.weights_digest(model)}", flush=True)  # Horovod: every rank
    if rank == 0:  # Horovod: only rank 0 writes the result
        session.save_results(config, model, run, history.history, config.out_dir, started)
