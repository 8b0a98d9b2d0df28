"""The training pipeline: prepare -> version -> train (horovodrun) -> evaluate -> export -> register, in MLflow.

Deployed by prefect.yaml as `training-pipeline/train` (on demand) and `training-pipeline/retrain` (weekly; skips
when data, code and params are those of the last successful run, unless force=true).
Run directly:  python -m flows.pipeline [--set train.epochs=5 ...] [--skip-unchanged] [--force] [--resume]
(--resume continues the newest interrupted run from its last checkpoint; --dry-run prepares the data, runs the
preflight checks and prints the launch plan and each rank's share of the data, without training.)
"""
from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment as running_deployment
from prefect.runtime import flow_run as running_flow
from pydantic import PositiveFloat, PositiveInt

from flows import summary
from flows.cli import shorten_bad_input_logs
from flows.timing import RunClock
from tasks import steps
from tasks.data.data_lock import DataHolder, prepared_data_lock
from tasks.launch.ahead import discard_ranks_ahead, start_ranks_ahead
from tasks.outputs.evaluate import summary_line
from tasks.params import Params, load_params
from tasks.passthrough import check_deployment_overrides
from tasks.tracking import run_log
from tasks.tracking.run_labels import flow_source
from tasks.tracking.server import use_tracking
from tasks.versioning.dvc_record import check_versionable
from tasks.workspace import RunWorkspace
from trainer.config import Backend
from trainer.process_end import end_now

shorten_bad_input_logs()
CLOCK = RunClock()  # this process's pipeline run: each step's wall time, for the line `make run` ends with


@task(name="convert")
def convert_task(params: Params) -> bool:
    return steps.convert_step(params, on_line=get_run_logger().info)


@task(name="validate", cache_policy=NO_CACHE)
def validate_task(data_dir: Path) -> dict[str, Any]:
    """Read-only: checks every shard against the manifest, unless the stamped report (outputs/validated.json) was
    made of these very files."""
    report = steps.validate_prepared(data_dir)
    get_run_logger().info("validated: %s", report["splits"])
    return report


def prepare_data(params: Params) -> dict[str, Any]:
    """The prepare step with conversion and (cached) validation as tasks; publishes the validation artifact."""
    from prefect.artifacts import create_markdown_artifact
    report = steps.prepare_step(params, convert=convert_task, check=validate_task)
    create_markdown_artifact(summary.validation_markdown(report, report["skipped"]), key="data-validation",
                             description="validation of the prepared TFRecord shards")
    return report


def log_line(line: str) -> None:
    """A training process's line into the task log (TensorFlow's start-up chatter at debug level)."""
    from tasks.launch.output.diagnosis import is_noise
    CLOCK.training.saw(line)
    logger = get_run_logger()
    (logger.debug if is_noise(line) else logger.info)(line)


def run_as_task(params: Params) -> steps.StepRunner:
    """The flows' runner of a step inside the run: a Prefect task of the step's name, timed for the closing line;
    a step whose failure may pass (training) is retried (pipeline.train_retries) from the run's last checkpoint."""
    def run_task(step: steps.RunStep, run: steps.RunContext) -> Any:
        options: dict[str, Any] = {"name": step.name, "cache_policy": NO_CACHE}
        if step.retried:
            options |= {"retries": params.pipeline.train_retries, "retry_condition_fn": worth_retrying,
                        "retry_delay_seconds": params.pipeline.retry_delay_seconds}
        with CLOCK.step(step.name):
            result = task(**options)(step.call)(run)
        get_run_logger().info("%s: %s", step.name, step.shown(step.give(run, result)))
        return result
    return run_task


def start_ahead(params: Params) -> None:
    """While the training runs: the fresh TensorFlow process starts when the gate will score the champion (its
    import is then done when register asks it; the ranks check their SavedModel's reload themselves), and
    evaluate's charting library is imported (while this thread waits on the ranks; at the start, it raced this
    thread's own imports of shared packages)."""
    import threading

    from tasks.outputs.charts import pyplot
    from tasks.outputs.export import start_fresh_process_ahead
    try:
        needed = steps.champion_needs_scoring(params)
    except Exception as error:  # the registry unreadable now: register will say so; the process is started anyway
        get_run_logger().debug("champion's recorded score not read: %s", error)
        needed = True
    if needed:
        start_fresh_process_ahead()
    threading.Thread(target=pyplot, name="import-charts", daemon=True).start()


def worth_retrying(task: Any, task_run: Any, state: Any) -> bool:
    """Retry only what may pass next time: not bad input, not an out-of-memory kill or a bug in a rank, nothing
    after Ctrl-C."""
    from tasks.errors import may_pass_on_retry
    return may_pass_on_retry(state.result(raise_on_failure=False))


def flow_overrides(named: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The flow's named parameters (those given) as train.* overrides, then the free-form overrides."""
    given = {f"train.{key}": value for key, value in named.items() if value is not None}
    return given | dict(overrides or {})


@flow(name="training-pipeline")
def training_pipeline(epochs: Optional[PositiveInt] = None, np: Optional[PositiveInt] = None,
                      batch_size: Optional[PositiveInt] = None, learning_rate: Optional[PositiveFloat] = None,
                      backend: Optional[Backend] = None, model: Optional[str] = None,
                      overrides: Optional[dict[str, Any]] = None, skip_unchanged: bool = False,
                      force: bool = False) -> dict[str, Any]:
    """Run every step once (params.yaml + the given values); with skip_unchanged, skip training when data,
    code and params are those of the last successful run, unless force."""
    given = flow_overrides({"epochs": epochs, "np": np, "batch_size": batch_size, "learning_rate": learning_rate,
                            "backend": backend, "model": model}, overrides)
    params = load_params(given)
    check_deployment_overrides(given, running_deployment.name)
    use_tracking(params.tracking)
    check_versionable(params)
    try:
        if not skip_unchanged or force:  # a run that may be skipped starts its ranks after the checks
            start_ranks_ahead(params)
        with CLOCK.step("prepare"):
            prepare_data(params)
        with prepared_data_lock(False, "a pipeline run", get_run_logger().info) as holder:  # to the run's end
            return checked_run(params, skip_unchanged and not force, holder)
    finally:
        discard_ranks_ahead()


def checked_run(params: Params, skip_unchanged: bool, holder: DataHolder) -> dict[str, Any]:
    """From preflight on, with the prepared data held: the checks; then skip when nothing changed (if asked), else
    the run's steps to its publishing."""
    from prefect.artifacts import create_markdown_artifact
    runner = run_as_task(params)
    source = flow_source(running_flow.flow_name, running_deployment.name)
    run = steps.RunContext(params, steps.RunHow(steps.RunLabels(source), holder=holder, on_line=log_line,
                                                skip_unchanged=skip_unchanged))
    run = steps.run_steps(run, steps.CHECKS, runner)
    state = asdict(run.state) if run.state else {}
    if previous := run.unchanged_since:
        get_run_logger().info("training skipped: data, code and params unchanged since run %s", previous)
        create_markdown_artifact(summary.skipped_markdown(previous, state, run_log.run_link(params, previous)),
                                 key="run-summary", description="retraining skipped")
        return {"skipped": True, "run_id": previous}
    start_ahead(params)
    start_ranks_ahead(params)  # unless started at the run's start
    run = steps.run_steps(run, steps.OPENED, runner)
    result = run_result(run)
    create_markdown_artifact(summary.run_markdown(result, params.train.model_dump(), state, list(run.changed),
                                                  run_log.run_link(params, run.run_id)),
                             key="run-summary", description=f"MLflow run {run.run_id}")
    return {"skipped": False, **result}


def run_result(run: steps.RunContext) -> dict[str, Any]:
    """What a run's steps gave, as the flow returns it; its per-epoch table published."""
    from prefect.artifacts import create_table_artifact
    create_table_artifact(summary.epoch_rows(RunWorkspace(run.run_id).training_history()), key="epoch-metrics",
                          description=f"per-epoch metrics of MLflow run {run.run_id}")
    return steps_result(run)


def steps_result(run: steps.RunContext) -> dict[str, Any]:
    """What the steps after the training gave, as a flow returns it."""
    return {"run_id": run.run_id, "metrics": run.metrics, "savedmodel": run.savedmodel,
            "gate": run.gate().sentence(), "dvc_record": run.dvc_record}


def resume_override(overrides: dict[str, Any]) -> dict[str, Any]:
    """`--resume`: continue the newest interrupted run (train.resume_from)."""
    from tasks.tracking.resume import interrupted_run
    return overrides | {"train.resume_from": interrupted_run(load_params(overrides))}


def dry_run(overrides: dict[str, Any]) -> int:
    """--dry-run: prepare, preflight, print the launch plan and the per-rank data plan; no run, no training."""
    from tasks.errors import report
    try:
        print("\n".join(steps.dry_run_step(load_params(overrides))))
    except Exception as error:  # every failure ends in one line; exit 2 for bad input, 1 otherwise
        return report(error)
    return 0




def main(argv: list[str] | None = None) -> int:
    from flows.cli import checked_overrides, run_flow
    parser = argparse.ArgumentParser(add_help=False)
    for flag in ("--skip-unchanged", "--force", "--resume", "--dry-run"):
        parser.add_argument(flag, action="store_true")
    flags, rest = parser.parse_known_args(argv)
    overrides = checked_overrides("python -m flows.pipeline", __doc__, rest, check_versionable,
                                  resolve_hosts=not flags.dry_run)
    if overrides is None:
        return 2
    if flags.dry_run:
        return dry_run(overrides)

    def pipeline_run() -> dict[str, Any]:
        given = resume_override(overrides) if flags.resume else overrides
        return training_pipeline(overrides=given, skip_unchanged=flags.skip_unchanged, force=flags.force)
    result, code = run_flow(pipeline_run)
    if result is None:
        return code
    if result["skipped"]:
        print(f"training skipped: nothing changed since mlflow run {result['run_id']}")
        return 0
    print(f"mlflow run id:  {result['run_id']}")
    print(summary_line(result["metrics"]))
    print(f"SavedModel:     {result['savedmodel']}")
    print(f"gate:           {result['gate']}")
    print(f"dvc:            {result['dvc_record']}")
    print(CLOCK.line(RunWorkspace(result["run_id"]).training_history().get("epoch_time", [])))
    return 0


if __name__ == "__main__":
    end_now(main())  # the run said its last line: no teardown of TensorFlow after it
