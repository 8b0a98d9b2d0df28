"""The sweep flow: prepare and version the data once, run trials of the training step over the search space of
params.yaml's `sweep:` section (Optuna: grid, random or TPE, the median pruner), `sweep.parallel` at once on the
slots there are, each its own MLflow run under the sweep's run; then evaluate, export and gate the best trial as
the pipeline does.

Run directly:  python -m flows.sweep [--set sweep.trials=6 --set sweep.parallel=2 --set train.epochs=3 ...]
"""
from __future__ import annotations

from typing import Any, Callable

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment as running_deployment

from flows.cli import checked_overrides, run_flow
from flows.pipeline import log_line, prepare_data, run_as_task, steps_result
from tasks import steps
from tasks.data.data_lock import prepared_data_lock
from tasks.outputs.evaluate import summary_line
from tasks.params import Params, load_params
from tasks.passthrough import check_deployment_overrides
from tasks.sweep.space import check_space, with_value
from tasks.tracking import mlflow_store
from tasks.tracking.run_labels import RunSource, flow_source
from tasks.tracking.server import use_tracking
from tasks.versioning.dvc_record import check_versionable
from trainer.process_end import end_now

FLOW_NAME = "training-pipeline"  # its deployment is training-pipeline/sweep, beside train and retrain


class NoTrialFinished(RuntimeError):
    """Every trial was pruned or failed: there is no model to register."""


def check_sweep(params: Params) -> None:
    """The search space and the slots, before anything starts (one line)."""
    from tasks.launch.launchers.choose import scheduler_for
    from tasks.sweep.slots import SlotPool
    from tasks.sweep.trial import trial_slots
    check_space(params, params.sweep)
    if scheduler_for(params) is None:  # a scheduler places each trial's job itself
        SlotPool(trial_slots(params)).check(params.train.np)


@task(name="trial", cache_policy=NO_CACHE)
def trial_task(sweep: Any) -> Any:
    """One trial: its values, its slots, its training run; how it ended."""
    from tasks.sweep.trial import run_trial
    outcome = run_trial(sweep)
    get_run_logger().info("trial %d %s: %s=%s (%s)", outcome.number, outcome.state, sweep.sweep.metric,
                          outcome.value, outcome.values)
    return outcome


def sweep_source() -> RunSource:
    """What started the sweep, for its runs' Source column: the flow run directly, or its deployment."""
    deployment = running_deployment.name  # training-pipeline/sweep says it is a sweep; the flow's name does not
    return flow_source(FLOW_NAME if deployment else f"{FLOW_NAME} (sweep)", deployment)


def trials_in_slots(submit: Callable[[], Any], count: int, at_once: int) -> list[Any]:
    """`count` trials, never more than `at_once` submitted: the next one as one ends (not every future at once);
    their outcomes by trial number."""
    from prefect.futures import as_completed
    pending: list[Any] = []
    outcomes: list[Any] = []
    submitted = 0
    while submitted < count or pending:
        while submitted < count and len(pending) < at_once:
            pending.append(submit())
            submitted += 1
        ended = next(as_completed(pending))
        pending.remove(ended)
        outcomes.append(ended.result())
    return sorted(outcomes, key=lambda outcome: outcome.number)


def run_trials(params: Params, version: Any) -> tuple[Any, list[Any]]:
    """The sweep's run and its trials, `sweep.parallel` at a time; (the best trial, every outcome)."""
    from prefect.artifacts import create_table_artifact

    from tasks.launch.launchers.choose import scheduler_for
    from tasks.sweep.report import close_sweep_run, open_sweep_run
    from tasks.sweep.search import make_study, trial_count
    from tasks.sweep.slots import SlotPool
    from tasks.sweep.trial import Sweep, trial_slots
    study = make_study(params.sweep)
    source = sweep_source()
    pool = SlotPool(trial_slots(params))
    at_once = pool.at_once(params.train.np, params.sweep.parallel)
    if at_once < params.sweep.parallel:
        get_run_logger().warning("sweep.parallel %d trials of train.np %d need %d slots, there are %d: %d at once",
                                 params.sweep.parallel, params.train.np, params.sweep.parallel * params.train.np,
                                 sum(trial_slots(params).values()), at_once)
    probed = steps.probe_step(params) if scheduler_for(params) is None else {}  # the hosts asked once
    parent = open_sweep_run(params, params.sweep, version, source)
    sweep = Sweep(params, params.sweep, study, pool, version, parent, source, log_line, at_once, probed=probed)
    with mlflow_store.failing_marks_run(parent):  # a sweep stopped half-way is not left RUNNING
        outcomes = trials_in_slots(lambda: trial_task.submit(sweep), trial_count(params.sweep), at_once)
        best = close_sweep_run(parent, params.sweep, study, outcomes)
    create_table_artifact([outcome.row(params.sweep.metric) for outcome in outcomes], key="sweep-trials",
                          description=f"the trials of sweep run {parent}")
    return best, outcomes


@flow(name=FLOW_NAME)
def training_sweep(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Prepare and version once, the trials, then the best trial's evaluation, export, gate and publishing."""
    params = load_params(overrides)
    check_deployment_overrides(overrides, running_deployment.name)
    use_tracking(params.tracking)
    check_versionable(params)
    check_sweep(params)
    prepare_data(params)
    with prepared_data_lock(False, "a sweep", get_run_logger().info):
        versioned = steps.run_steps(steps.RunContext(params), [steps.VERSION], run_as_task(params))
        best, outcomes = run_trials(params, versioned.data_version())
        if best is None:
            raise NoTrialFinished(f"no trial of the sweep finished ({len(outcomes)} pruned or failed): "
                                  "nothing to register")
        best_params = with_value(params, best.values)  # the steps after its training, as the pipeline's
        run = steps.run_steps(steps.RunContext(best_params, run_id=best.run_id), steps.AFTER_TRAINING,
                              run_as_task(best_params))
    return {"best": best, "outcomes": outcomes, "metric": params.sweep.metric, **steps_result(run)}


def main(argv: list[str] | None = None) -> int:
    overrides = checked_overrides("python -m flows.sweep", __doc__, argv, check_sweep)
    if overrides is None:
        return 2
    result, code = run_flow(lambda: training_sweep(overrides))
    if result is None:
        return code
    for outcome in sorted(result["outcomes"], key=lambda outcome: outcome.number):
        said = f"{result['metric']} {outcome.value:.4f}" if outcome.value is not None else outcome.said
        print(f"trial {outcome.number}: {outcome.state:8} {said}  {outcome.values}")
    print(f"best trial:     {result['best'].number} (mlflow run {result['best'].run_id})")
    print(summary_line(result["metrics"]))
    print(f"gate:           {result['gate']}")
    return 0


if __name__ == "__main__":
    end_now(main())  # the run said its last line: no teardown of TensorFlow after it
