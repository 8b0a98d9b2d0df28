"""One trial of a sweep: its values from the study, its slots from the pool, its own MLflow run (a child of the
sweep's), the normal training step with rank 0's epochs reported to the pruner; retried once when the failure may
pass, recorded as failed when its input is bad, marked pruned when the pruner stopped it."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tasks import steps
from tasks.errors import is_bad_input, sentence
from tasks.interrupt import interrupted
from tasks.launch.hostlist import host_slots, listed
from tasks.launch.launchers.choose import scheduler_for
from tasks.launch.preflight import Probed
from tasks.params import Params
from tasks.sweep.pruning import EpochReporter, TrialPruned
from tasks.sweep.search import suggest
from tasks.sweep.slots import SlotPool, hosts_text
from tasks.sweep.space import SweepParams, with_value
from tasks.tracking import mlflow_store, run_log
from tasks.tracking.run_labels import RunSource
from tasks.versioning.dvc import DataVersion
from tasks.versioning.run_state import run_state

TRIAL_TAG = "ringflow.sweep.trial"  # a trial's number in its sweep
TRIAL_STATE_TAG = "ringflow.sweep.trial_state"  # finished, pruned or failed
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI lists the trial under the sweep's run


@dataclass
class Sweep:
    """What every trial of one sweep shares."""
    base: Params
    sweep: SweepParams
    study: Any
    pool: SlotPool
    version: DataVersion
    parent_run_id: str
    source: RunSource
    on_line: Callable[[str], None] = print
    parallel: int = 1  # trials at once: sweep.parallel, or as many as the slots hold
    probed: Probed = field(default_factory=dict)  # the answers of the sweep's hosts, probed once for every trial
    asking: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.at_once = threading.Semaphore(self.parallel)


@dataclass
class TrialOutcome:
    """How a trial ended, for the sweep's table."""
    number: int
    run_id: str | None
    values: dict[str, Any]
    state: str  # finished, pruned or failed
    value: float | None  # the metric of its last epoch
    epochs: int
    seconds: float
    said: str = ""  # why it was pruned or failed

    def row(self, metric: str) -> dict[str, Any]:
        return {"trial": self.number, "state": self.state, metric: self.value, "epochs": self.epochs,
                "seconds": round(self.seconds, 1), **self.values, "run_id": self.run_id or "", "said": self.said}


def placed_params(base: Params, values: dict[str, Any], placed: dict[str, int], parallel: int) -> Params:
    """A trial's params: its values, on its slots (train.hosts when the sweep's hosts were named; on this machine,
    its share of the cores as each rank's threads)."""
    chosen = dict(values)
    if scheduler_for(base):  # the scheduler places each trial's job
        return with_value(base, chosen)
    if listed(base.train):
        chosen |= {"train.hosts": hosts_text(placed), "train.hostfile": None}  # its slots, named either way
    elif not base.train.intra_op_threads:
        chosen["train.intra_op_threads"] = max(1, (os.cpu_count() or 1) // (parallel * base.train.np))
    return with_value(base, chosen)


def trial_slots(base: Params) -> dict[str, int]:
    """The slots the sweep's trials share: the named hosts', or this machine's cores (under a scheduler, the jobs of
    `parallel` trials: the cluster finds their nodes)."""
    if scheduler := scheduler_for(base):
        return scheduler.trial_slots(base, base.sweep.parallel)
    return host_slots(base.train) if listed(base.train) else {"localhost": os.cpu_count() or 1}


def trial_tags(sweep: Sweep, number: int) -> dict[str, str]:
    """A trial run's tags: its parent, the sweep's run (MLflow's UI lists it there), and its number."""
    return {PARENT_TAG: sweep.parent_run_id, TRIAL_TAG: str(number)}


def open_trial_run(sweep: Sweep, params: Params, number: int, check: Any) -> str:
    """The trial's MLflow run, a child of the sweep's run."""
    return steps.open_run_step(params, check, sweep.version, run_state(params, sweep.version), sweep.source,
                               tags=trial_tags(sweep, number), name_prefix=f"trial-{number}")


def unlaunched_run(sweep: Sweep, params: Params, number: int) -> str:
    """The run of a trial refused before its launch (bad input for its values): listed with the others."""
    return run_log.open_run(params, sweep.version, run_state(params, sweep.version), sweep.source,
                            trial_tags(sweep, number), f"trial-{number}")


def train_trial(sweep: Sweep, trial: Any, params: Params, run_id: str, check: Any) -> EpochReporter:
    """The training step of the trial, once more from its checkpoint when the failure may pass."""
    for attempt in (1, 2):
        reporter = EpochReporter(trial, sweep.sweep.metric, sweep.on_line)
        try:
            steps.run_steps(steps.RunContext(params, run_id, check, reporter, model_outputs=False),
                            last=steps.TRAINING)
            return reporter
        except TrialPruned:
            raise
        except Exception as error:  # a retryable failure gets one more try; the rest end the trial
            if attempt == 2 or interrupted() or is_bad_input(error) or not getattr(error, "retryable", True):
                raise
            sweep.on_line(f"trial {trial.number}: {sentence(error)}; trying again from its last checkpoint")
    raise AssertionError("unreachable")


def run_trial(sweep: Sweep) -> TrialOutcome:
    """Ask the study for a trial, wait for its slots, train it, tell the study how it ended."""
    with sweep.at_once:  # asked only when it starts: TPE learns from every trial ended before
        if interrupted():  # Ctrl-C: no trial starts after it
            raise KeyboardInterrupt
        placed = sweep.pool.take(sweep.base.train.np)
        try:
            return asked_trial(sweep, placed)
        finally:
            sweep.pool.give(placed)


def asked_trial(sweep: Sweep, placed: dict[str, int]) -> TrialOutcome:
    """A new trial of the study on these slots, from its values to how it ended."""
    import optuna
    with sweep.asking:
        trial = sweep.study.ask()
        values = suggest(trial, sweep.sweep)
    started, run_id = time.monotonic(), None
    params = placed_params(sweep.base, values, placed, sweep.parallel)  # the space was checked before
    try:
        check = steps.preflight_step(params, sweep.probed)
        run_id = open_trial_run(sweep, params, trial.number, check)
        reporter = train_trial(sweep, trial, params, run_id, check)
    except TrialPruned as pruned:
        sweep.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return ended(sweep, trial.number, run_id, values, "pruned", str(pruned), started, pruned.epoch)
    except Exception as error:  # bad input or a failure after its retry: the sweep goes on (not after Ctrl-C)
        if interrupted():
            raise KeyboardInterrupt from error
        sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        run_id = run_id or unlaunched_run(sweep, params, trial.number)
        return ended(sweep, trial.number, run_id, values, "failed", sentence(error), started, 0)
    if not reporter.values:  # no epoch reported the metric: nothing to compare it by
        sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return ended(sweep, trial.number, run_id, values, "failed", f"no epoch reported {sweep.sweep.metric}",
                     started, 0)
    value = reporter.values[-1]
    sweep.study.tell(trial, value)
    mlflow_store.set_tags(run_id, {TRIAL_STATE_TAG: "finished"})
    mlflow_store.end_run(run_id, ok=True)  # the best trial's evaluation, export and gate come after the sweep
    return TrialOutcome(trial.number, run_id, values, "finished", value, len(reporter.values),
                        time.monotonic() - started)


def ended(sweep: Sweep, number: int, run_id: str | None, values: dict[str, Any], state: str, said: str,
          started: float, epochs: int) -> TrialOutcome:
    """A trial that did not finish: its run marked (KILLED when pruned, FAILED otherwise) and tagged."""
    if run_id:
        mlflow_store.set_tags(run_id, {TRIAL_STATE_TAG: state, "ringflow.sweep.said": said})
        mlflow_store.client().set_terminated(run_id, status="KILLED" if state == "pruned" else "FAILED")
    sweep.on_line(f"trial {number} {state}: {said}")
    return TrialOutcome(number, run_id, values, state, None, epochs, time.monotonic() - started, said)
