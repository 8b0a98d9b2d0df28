"""One trial of a sweep: its values from the study, its slots from the pool, its own MLflow run (a child of the
sweep's), the normal training step with rank 0's epochs reported to the pruner; retried once when the failure may
pass, recorded as failed when its input is bad, marked pruned when the pruner stopped it."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from tasks import steps
from tasks.errors import may_pass_on_retry, sentence
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


def unlaunched_run(sweep: Sweep, params: Params, number: int) -> str:
    """The run of a trial refused before its launch (bad input for its values): listed with the others."""
    return run_log.open_run(params, sweep.version, run_state(params, sweep.version), sweep.source,
                            trial_tags(sweep, number), f"trial-{number}")


class TrialRunner:
    """How a trial runs its steps: directly, and its training once more from its checkpoint when the failure may
    pass, each try reporting rank 0's epochs to the pruner. It keeps the trial's run (to mark it however it ends)
    and the last try's reporter (the metric's values)."""

    def __init__(self, sweep: Sweep, trial: Any) -> None:
        self.sweep, self.trial = sweep, trial
        self.run_id: str | None = None
        self.reporter = EpochReporter(trial, sweep.sweep.metric, sweep.on_line, sweep.base.train.epochs)

    def __call__(self, step: steps.RunStep, run: steps.RunContext) -> Any:
        self.run_id = run.run_id or None
        if not step.retried:
            return step.call(run)
        for attempt in (1, 2):
            self.reporter = EpochReporter(self.trial, self.sweep.sweep.metric, self.sweep.on_line,
                                          run.params.train.epochs)
            try:
                return step.call(replace(run, how=replace(run.how, on_line=self.reporter)))
            except TrialPruned:
                raise
            except Exception as error:  # a retryable failure gets one more try; the rest end the trial
                if attempt == 2 or not may_pass_on_retry(error):
                    raise
                self.sweep.on_line(f"trial {self.trial.number}: {sentence(error)}; trying again from its last "
                                   "checkpoint")
        raise AssertionError("unreachable")


def trial_run(sweep: Sweep, params: Params, number: int) -> steps.RunContext:
    """A trial's pipeline run before its steps: the sweep's data version and hosts' answers, a child run of the
    sweep's, numbered."""
    labels = steps.RunLabels(sweep.source, trial_tags(sweep, number), f"trial-{number}")
    how = steps.RunHow(labels, probed=sweep.probed, model_outputs=False)
    return steps.RunContext(params, how, version=sweep.version, state=run_state(params, sweep.version))


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
    started = time.monotonic()
    params = placed_params(sweep.base, values, placed, sweep.parallel)  # the space was checked before
    runner = TrialRunner(sweep, trial)
    try:
        run = steps.run_steps(trial_run(sweep, params, trial.number), steps.TRAINING_RUN, runner)
    except TrialPruned as pruned:
        sweep.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return ended(sweep, trial.number, runner.run_id, values, "pruned", str(pruned), started, pruned.epoch)
    except Exception as error:  # bad input or a failure after its retry: the sweep goes on (not after Ctrl-C)
        if interrupted():
            raise KeyboardInterrupt from error
        sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        run_id = runner.run_id or unlaunched_run(sweep, params, trial.number)
        return ended(sweep, trial.number, run_id, values, "failed", sentence(error), started, 0)
    return finished(sweep, trial, run.run_id, runner.reporter, values, started)


def finished(sweep: Sweep, trial: Any, run_id: str, reporter: EpochReporter, values: dict[str, Any],
             started: float) -> TrialOutcome:
    """A trial whose training ended: the study told its metric (a failure when no epoch reported it)."""
    import optuna
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
