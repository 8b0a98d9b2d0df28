"""The scaling flow: the same config at np = train.scaling_np, a table and chart of images/sec and efficiency.

Run directly:  python -m flows.scaling [--set train.scaling_np=[1,2] --set epochs=3 ...]
"""
from __future__ import annotations

from typing import Any

from prefect import flow, task

from flows.cli import checked_overrides, run_flow, with_np
from flows.pipeline import log_line, prepare_data, run_as_task
from tasks import steps
from tasks.params import Params, load_params
from tasks.tracking.server import use_tracking
from tasks.versioning.dvc import DataVersion
from tasks.versioning.dvc_record import check_versionable
from trainer.process_end import end_now


@task(name="train-at-np")
def train_at_np_task(params: Params, version: DataVersion) -> str:
    """One finished training run at params.train.np (its own model directory)."""
    return steps.scaling_train_step(params, version, on_line=log_line)


@task(name="scaling-report")
def report_task(params: Params, runs: list[tuple[int, str]]) -> list[dict[str, Any]]:
    from prefect.artifacts import create_table_artifact
    rows, report_run = steps.scaling_report_step(params, runs)
    create_table_artifact(rows, key="scaling", description=f"images/sec and efficiency (MLflow run {report_run})")
    return rows


@flow(name="scaling")
def scaling_flow(overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Prepare and version once, train at each np in ascending order, report the scaling table."""
    params = load_params(overrides)
    use_tracking(params.tracking)
    check_versionable(params)
    prepare_data(params)
    versioned = steps.run_steps(steps.RunContext(params), [steps.VERSION], run_as_task(params))
    runs = []
    for np in sorted(set(params.train.scaling_np)):  # each its own run, trained from scratch
        runs.append((np, train_at_np_task(with_np(params, np), versioned.data_version())))
    return report_task(params, runs)


def main(argv: list[str] | None = None) -> int:
    overrides = checked_overrides("python -m flows.scaling", __doc__, argv, check_versionable,
                                  counts=lambda params: params.train.scaling_np)
    if overrides is None:
        return 2
    rows, code = run_flow(lambda: scaling_flow(overrides))
    if rows is None:
        return code
    for row in rows:
        print(f"np={row['np']}: {row['images_per_sec']:,.1f} images/sec, efficiency {row['scaling_efficiency']:.3f}")
    return 0


if __name__ == "__main__":
    end_now(main())  # the run said its last line: no teardown of TensorFlow after it
