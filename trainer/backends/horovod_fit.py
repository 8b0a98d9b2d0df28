"""Backend `horovod`: Keras fit with hvd.DistributedOptimizer, broadcast from rank 0, own metric averaging."""
from __future__ import annotations

import math

import horovod.tensorflow as hvd_tf
import tensorflow as tf

from trainer import session
from trainer.backends import horovod_common
from trainer.backends.horovod_keras import hvd
from trainer.callbacks import CheckpointEveryEpoch, MetricAverage
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.data import rank_dataset, rank_record_count
from trainer.models import build_model


def compiled_model(config: TrainerConfig, run: session.Plan) -> tf.keras.Model:
    """The model compiled with a DistributedOptimizer on the scaled, warmed-up learning rate."""
    model = build_model(config.train.model, run.input_shape, run.manifest["num_classes"])
    optimizer = hvd.DistributedOptimizer(session.make_optimizer(run),  # Horovod: averaged gradients
                                         compression=horovod_common.compression(config))
    model.compile(optimizer=optimizer, loss=session.loss_function(), metrics=["accuracy"],
                  steps_per_execution=config.train.steps_per_execution)
    return model


def callbacks(config: TrainerConfig, run: session.Plan, rank: int, size: int, checkpoints: Checkpoints,
              broadcast: bool = True) -> list:
    """Callbacks every rank runs, then rank 0's reporting and checkpointing (the epoch's metrics out before its
    checkpoint: a resume never skips an unlogged epoch). broadcast: rank 0's weights to all at the first batch
    (not in elastic mode, whose state sync does it)."""
    val_records = rank_record_count(run.manifest, "validation", rank, size)  # Horovod: this rank's share
    every_rank = [MetricAverage(horovod_common.average_over_ranks, val_records)]  # Horovod: average metrics
    if broadcast:
        every_rank.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))  # Horovod: rank 0's weights
    if rank != 0:  # Horovod: only rank 0 checkpoints and reports
        return every_rank
    return every_rank + session.reporting_callbacks(config, run) + [CheckpointEveryEpoch(checkpoints)]


def fit_inputs(config: TrainerConfig, run: session.Plan, rank: int, size: int) -> dict:
    """model.fit's data arguments for this rank: its share of the training data, its part of the validation split."""
    batch_size = config.train.batch_size
    val_records = rank_record_count(run.manifest, "validation", rank, size)  # Horovod: this rank's share
    return {"x": session.training_dataset(config, run, rank, size, batch_size, hvd.local_size()),  # Horovod
            "steps_per_epoch": run.steps_per_epoch,
            "validation_data": rank_dataset(config.job.data_dir, run.manifest, "validation", rank=rank,  # Horovod
                                            size=size, batch_size=batch_size, input_shape=run.input_shape),
            "validation_steps": math.ceil(val_records / batch_size)}


def train(config: TrainerConfig) -> None:
    """Train this rank's part; rank 0 saves checkpoints every epoch and the final model."""
    train_params, job = config.train, config.job
    rank, size = horovod_common.start(config)
    session.set_precision(config)
    run = session.plan(config, processes=size)  # Horovod: one replica and input pipeline per rank
    model = compiled_model(config, run)
    checkpoints = Checkpoints(job.checkpoint_dir, model, model.optimizer, train_params.keep_checkpoints,
                              job.checkpoint_owner)
    started = horovod_common.resume(config, checkpoints)
    hvd_tf.broadcast_variables(model.variables, root_rank=0)  # Horovod: same start even with many steps per call
    session.hold_training_input(model)
    history = model.fit(**fit_inputs(config, run, rank, size), epochs=train_params.epochs, initial_epoch=started,
                        verbose=0, callbacks=callbacks(config, run, rank, size, checkpoints))
    session.print_weights_digest(model, f"rank={rank}")  # Horovod: every rank, to compare
    if rank == 0:  # Horovod: only rank 0 writes the result
        session.save_results(config, model, run, history.history, job.out_dir, started)
