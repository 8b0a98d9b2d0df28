"""Backend `horovod` with train.elastic: the same Keras fit inside Horovod's elastic loop (hvd.elastic.run with a
KerasState on tf-keras), the state committed at the end of every epoch.

When a host is lost, the ranks left go back to the last commit; when one is added, all stop at the next commit.
Either way Horovod forms the ring anew and every rank remakes its plan for the new size before fitting on: its share
of the data, the steps per epoch and the scaled learning rate. A rank that joins late runs no collective before the
state sync (that would deadlock the others): it gets rank 0's weights, optimizer state and epoch from the sync.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainer import loop, session
from trainer.backends import horovod_fit
from trainer.backends.horovod_keras import hvd
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.protocol import elastic_start_line


class RanksInLogs(tf.keras.callbacks.Callback):
    """Adds `world_size` (the ranks that trained the epoch) to the epoch's metrics."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if logs is not None:
            logs["world_size"] = float(self._size)


class CommitEveryEpoch(tf.keras.callbacks.Callback):
    """Horovod: commits the epoch's state (and its metrics) after it is reported and checkpointed; the commit
    raises HostsUpdatedInterrupt when hosts were added or removed, and the elastic loop forms the ring anew."""

    def __init__(self, state: Any) -> None:
        super().__init__()
        self._state = state

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        history = self._state.history  # a new dict each epoch: a restore goes back to the committed one
        self._state.history = {key: [*history.get(key, []), float(value)] for key, value in (logs or {}).items()}
        self._state.epoch = epoch + 1
        self._state.commit()  # Horovod: the state every rank goes back to after a failure


def follow_size(model: tf.keras.Model, run: session.Plan) -> None:
    """Horovod: the learning rate and its warmup scaled to the current number of ranks; the train step is traced
    again with them."""
    schedule = model.optimizer.learning_rate
    schedule.initial, schedule.target = run.learning_rate
    schedule.warmup_steps = run.warmup_steps
    model.train_function = None


@hvd.elastic.run  # Horovod: run again from the last commit whenever the ranks change
def fit_elastic(state: Any, config: TrainerConfig, backend: loop.Backend, checkpoints: Checkpoints) -> dict:
    """Fit from the committed epoch to the last with the ranks there are now; returns every epoch's metrics."""
    rank, size = hvd.rank(), hvd.size()
    run = session.plan(config, processes=size)  # Horovod: the plan of the current size
    follow_size(state.model, run)
    if rank == 0:
        print(elastic_start_line(size, state.epoch + 1), flush=True)
    val_records = horovod_fit.validation_share(run, rank, size)
    every_rank = [*horovod_fit.every_rank(val_records, broadcast=False), RanksInLogs(size)]  # Horovod
    loop.fit_epochs(config, run, backend, state.model, checkpoints, state.epoch,
                    horovod_fit.fit_inputs(config, run, rank, size, val_records), before=every_rank,
                    after=[CommitEveryEpoch(state)], hold_input=False)
    return state.history


class HorovodElastic(horovod_fit.HorovodFit):
    """Keras fit inside Horovod's elastic loop; whichever process is rank 0 at the end saves the model."""
    must_train = False  # a rank that joins at the last commit syncs and ends with the others

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        model, optimizer = super().build(config, run)
        optimizer._create_all_weights(model.trainable_variables)  # Horovod: slots exist for the first sync
        return model, optimizer

    def agree(self, epochs_done: int) -> int:
        return epochs_done  # Horovod: no collective here; the state sync gives every rank rank 0's epoch

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        self.state = hvd.elastic.KerasState(model, epoch=started, started=started, history={})  # Horovod: synced
        return fit_elastic(self.state, config, self, checkpoints)

    def final_plan(self, config: TrainerConfig, run: session.Plan) -> session.Plan:
        return session.plan(config, processes=hvd.size())  # Horovod: the last ring's

    def resumed_from(self, started: int) -> int:
        return int(self.state.started)  # Horovod: rank 0's, synced

    def communication(self, model: tf.keras.Model, history: loop.History,
                      run: session.Plan) -> dict[str, float] | None:
        return None  # a ring whose members change is not timed: a rank that joined late may have ended already


def train(config: TrainerConfig) -> None:
    loop.train(config, HorovodElastic())
