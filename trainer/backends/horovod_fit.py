"""Backend `horovod`: Keras fit with hvd.DistributedOptimizer, broadcast from rank 0, own metric averaging."""
from __future__ import annotations

import math
from typing import Any

import horovod.tensorflow as hvd_tf
import tensorflow as tf

from trainer import loop, session
from trainer.backends import horovod_common
from trainer.backends.horovod_keras import hvd
from trainer.callbacks import MetricAverage
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.data import rank_record_count


def compiled_model(config: TrainerConfig, run: session.Plan) -> tf.keras.Model:
    """The model compiled with a DistributedOptimizer on the scaled, warmed-up learning rate."""
    model = session.job_model(config, run)
    optimizer = horovod_common.averaging_optimizer(session.make_optimizer(run), config)  # Horovod: averaged
    model.compile(optimizer=optimizer, **session.compile_options(config, run),
                  steps_per_execution=config.train.steps_per_execution)
    return model


def every_rank(val_records: int, broadcast: bool = True) -> list:
    """The callbacks every rank runs before rank 0's reports: the averaging over ranks (validation metrics weighted
    by the rank's `val_records`), and first the broadcast of rank 0's weights at the first batch (not in elastic
    mode, whose state sync does it)."""
    averaging = [MetricAverage(horovod_common.average_over_ranks, val_records)]  # Horovod: average metrics
    return [hvd.callbacks.BroadcastGlobalVariablesCallback(0), *averaging] if broadcast else averaging  # Horovod


def validation_share(run: session.Plan, rank: int, size: int) -> int:
    """This rank's records of the validation split."""
    return rank_record_count(run.manifest, "validation", rank, size)  # Horovod: this rank's share


def fit_inputs(config: TrainerConfig, run: session.Plan, rank: int, size: int, val_records: int) -> dict:
    """model.fit's data arguments for this rank: its share of the training data, its part of the validation split
    (`val_records` records)."""
    batch_size = config.train.batch_size
    return {"x": session.training_dataset(config, run, rank, size, batch_size, hvd.local_size()),  # Horovod
            "steps_per_epoch": run.steps_per_epoch,
            "validation_data": session.validation_dataset(config, run, batch_size, rank, size),  # Horovod: its part
            "validation_steps": math.ceil(val_records / batch_size)}


class HorovodFit(horovod_common.Horovod):
    """Keras fit on every rank; rank 0 reports and checkpoints every epoch and saves the model."""

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        model = compiled_model(config, run)
        return model, model.optimizer

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        rank, size = hvd.rank(), hvd.size()
        hvd_tf.broadcast_variables(model.variables, root_rank=0)  # Horovod: same start even with many steps per call
        val_records = validation_share(run, rank, size)
        return loop.fit_epochs(config, run, self, model, checkpoints, started,
                               fit_inputs(config, run, rank, size, val_records), before=every_rank(val_records))


def train(config: TrainerConfig) -> None:
    loop.train(config, HorovodFit())
