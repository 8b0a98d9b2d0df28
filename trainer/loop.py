"""The one training loop every backend runs: join, plan, model, the agreed resume, the epochs (Keras fit or a custom
step), every process's weights digest, the results. A backend (trainer/backends/) is a `Backend`: it answers only
what differs -- how its processes join and which leads, its model and optimizer, how the resume is agreed, its
callbacks or its epoch -- as Horovod's examples mark only the lines that differ from single-process Keras."""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import tensorflow as tf

from trainer import session
from trainer.callbacks import CheckpointEveryEpoch
from trainer.checkpoint_files import check_epochs_left, fail_before_save, saved_epochs
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.protocol import resumed_line

History = dict[str, list[float]]


class Backend:
    """One backend's answers, asked in the loop's order. `every_process_saves`: each process checkpoints and saves
    the model, which a collective strategy needs of all of them; only the lead's copy is kept (the others write to
    a scratch directory)."""
    every_process_saves = False
    # no more epochs checkpointed than the job trains, and with all of them its epochs are skipped (False: they always
    # run, whatever the checkpoints hold -- Horovod's elastic ranks meet in its loop's state sync)
    must_train = True

    def start(self, config: TrainerConfig) -> dict[str, Any]:
        """Join the job's processes, pin devices, seed; what the process applied of the job's tuning (none: {})."""
        raise NotImplementedError

    def lead(self) -> bool:
        """Whether this process speaks for the job: reports the epochs, keeps the checkpoints and the model."""
        raise NotImplementedError

    def who(self) -> str:
        """This process's name on its digest line (rank=0, task=chief:0)."""
        raise NotImplementedError

    def plan(self, config: TrainerConfig) -> session.Plan:
        raise NotImplementedError

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        """The model and its optimizer (compiled, for Keras fit)."""
        raise NotImplementedError

    def agree(self, epochs_done: int) -> int:
        """The epoch every process starts from, given what this one's checkpoint index says."""
        return epochs_done

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> History:
        """The epochs from `started` to the last (fit_epochs or step_epochs); the history of their metrics."""
        raise NotImplementedError

    def final_plan(self, config: TrainerConfig, run: session.Plan) -> session.Plan:
        """The plan the results are written with (an elastic ring's size may have changed)."""
        return run

    def resumed_from(self, started: int) -> int:
        """The epoch the job resumed from, for its summary (an elastic ring's synced state holds it)."""
        return started

    def communication(self, model: tf.keras.Model, history: History, run: session.Plan) -> dict[str, float] | None:
        """The gradients' averaging against the steady step (trainer/communication.py), timed by every process after
        the epochs; None where the backend does not measure it."""
        return None


def train(config: TrainerConfig, backend: Backend) -> None:
    """Train this process's part; the lead checkpoints every epoch and writes the model and what follows it."""
    tuned = backend.start(config)
    session.set_precision(config)
    run = backend.plan(config)
    model, optimizer = backend.build(config, run)
    with scratch(backend) as elsewhere:
        job = config.job
        checkpoints = Checkpoints(job.checkpoint_dir, model, optimizer, config.train.keep_checkpoints,
                                  job.checkpoint_owner, save_dir=elsewhere and elsewhere / "checkpoints")
        started = resume(config, backend, checkpoints)
        trains = started < config.train.epochs or not backend.must_train
        history = backend.epochs(config, run, model, checkpoints, started) if trains else {}
        communication = backend.communication(model, history, run) if trains else None
        fail_before_save()  # tests only
        session.print_weights_digest(model, backend.who())  # every process, to compare
        if backend.lead() or elsewhere:
            out_dir = elsewhere / "model" if elsewhere else job.out_dir
            session.save_results(config, model, backend.final_plan(config, run), history, out_dir,
                                 backend.resumed_from(started), communication, tuned)


@contextlib.contextmanager
def scratch(backend: Backend) -> Iterator[Path | None]:
    """Where a process other than the lead writes what every process must write (its checkpoints, its copy of the
    model), removed when it is done; None where the process writes the job's own places or nothing."""
    if backend.lead() or not backend.every_process_saves:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="ringflow-worker-") as directory:
        yield Path(directory)


def saves(backend: Backend) -> bool:
    return backend.lead() or backend.every_process_saves


def resume(config: TrainerConfig, backend: Backend, checkpoints: Checkpoints) -> int:
    """The epoch to start from: agreed on what the checkpoint index says before any process restores (a restore on
    some processes only would mismatch the collectives), then restored by each; the lead says so."""
    started = backend.agree(saved_epochs(config.job.checkpoint_dir))
    checkpoints.restore_latest()
    if backend.must_train:
        check_epochs_left(started, config.train.epochs)
    if started and backend.lead():
        print(resumed_line(started), flush=True)
        if started >= config.train.epochs and backend.must_train:
            print(f"the checkpoints hold all {started} epochs (the job that trained them ended before it saved the "
                  "model): saving the restored model", flush=True)
    return started


def fit_epochs(config: TrainerConfig, run: session.Plan, backend: Backend, model: tf.keras.Model,
               checkpoints: Checkpoints, started: int, inputs: dict[str, Any], before: list | None = None,
               after: list | None = None, hold_input: bool = True) -> History:
    """Keras fit from `started` with fit_callbacks around the backend's own (`before`, `after`)."""
    made = fit_callbacks(config, run, backend.lead(), saves(backend), checkpoints, before or [], after or [])
    if hold_input:
        session.hold_training_input(model)
    history = model.fit(**inputs, epochs=config.train.epochs, initial_epoch=started, verbose=0, callbacks=made)
    return history.history


def fit_callbacks(config: TrainerConfig, run: session.Plan, lead: bool, saving: bool, checkpoints: Checkpoints,
                  before: list, after: list) -> list:
    """The backend's callbacks (`before`: what every process runs, such as the averaging), the lead's reports,
    each epoch's checkpoint (its metrics out before it: a resume never skips an unlogged epoch), then `after`."""
    reports = session.reporting_callbacks(config, run) if lead else []
    return [*before, *reports, *([CheckpointEveryEpoch(checkpoints)] if saving else []), *after]


def step_epochs(config: TrainerConfig, backend: Backend, checkpoints: Checkpoints, started: int,
                run_epoch: Callable[[int], dict[str, float]]) -> History:
    """A custom loop from `started`: `run_epoch(epoch)` trains and validates one epoch and gives its metrics; the
    lead reports them before the epoch's checkpoint (a resume never skips an unlogged epoch)."""
    from trainer.metrics_sink import metric_sink
    lead = backend.lead()
    sink = metric_sink(config.job) if lead else None
    writer = tf.summary.create_file_writer(str(session.tensorboard_dir(config))) \
        if lead and config.train.tensorboard else None
    history: History = {}
    for epoch in range(started, config.train.epochs):
        logs = run_epoch(epoch)
        for key, value in logs.items():
            history.setdefault(key, []).append(float(value))
        if lead:
            session.report_epoch(epoch, logs, sink, writer)
        if saves(backend):
            checkpoints.save(epoch + 1)
    return history
