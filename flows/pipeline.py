"""The training pipeline: prepare -> version -> train (horovodrun) -> evaluate -> export, tracked in MLflow.

Run directly:  python -m flows.pipeline [--set train.epochs=5 ...]
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task

from tasks import steps, version
from tasks.params import Params, ParamsError, load_params


def validation_markdown(report: dict[str, Any]) -> str:
    """The validation report as a markdown table for the Prefect UI."""
    rows = [f"| {split} | {s['records']} | {s['shards']} | {s['bytes']:,} |" for split, s in report["splits"].items()]
    return "\n".join([f"### Data validation: {report['source']} — valid", "",
                      f"{report['classes']} classes, image shape {report['image_shape']}, "
                      f"conversion {'skipped (up to date)' if report['skipped'] else 'done'}", "",
                      "| split | records | shards | bytes |", "| --- | --- | --- | --- |", *rows])


@task(name="prepare")
def prepare_task(params: Params) -> dict[str, Any]:
    from prefect.artifacts import create_markdown_artifact
    logger = get_run_logger()
    report = steps.prepare_step(params, on_line=logger.info)
    create_markdown_artifact(validation_markdown(report), key="data-validation",
                             description="validation of the prepared TFRecord shards")
    logger.info("validated: %s", report["splits"])
    return report


@task(name="version")
def version_task() -> version.DataVersion:
    data_version = version.version_data()
    get_run_logger().info("data %s at git %s (pushed to the DVC remote)", data_version.data_hash,
                          data_version.git_commit)
    return data_version


@task(name="train")
def train_task(params: Params) -> str:
    from tasks.launch import is_noise
    logger = get_run_logger()
    return steps.train_step(params, on_line=lambda line: (logger.debug if is_noise(line) else logger.info)(line))


@task(name="evaluate")
def evaluate_task(run_id: str) -> dict[str, float]:
    return steps.evaluate_step(run_id)


@task(name="export")
def export_task(run_id: str) -> str:
    return str(steps.export_step(run_id))


@task(name="record-outputs")
def record_outputs_task(params: Params) -> bool:
    """Record train/evaluate/export outputs in dvc.lock when they were made from params.yaml as it stands."""
    if params.train != load_params().train:
        get_run_logger().info("training params were overridden: dvc.lock keeps the outputs of params.yaml")
        return False
    version.commit_stages("train", "evaluate", "export")
    return True


def check_versionable(params: Params) -> None:
    """Data params must be those of params.yaml: DVC records the prepare stage from that file."""
    if params.data != load_params().data:
        raise ParamsError("data.* overrides cannot be versioned by DVC: change them in params.yaml")


@flow(name="training-pipeline")
def training_pipeline(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run every step once; returns the MLflow run id, test metrics and the SavedModel path."""
    params = load_params(overrides)
    check_versionable(params)
    prepare_task(params)
    version_task()
    run_id = train_task(params)
    metrics = evaluate_task(run_id)
    savedmodel = export_task(run_id)
    record_outputs_task(params)
    return {"run_id": run_id, **metrics, "savedmodel": savedmodel}


def main(argv: list[str] | None = None) -> int:
    from flows.cli import checked_overrides
    overrides = checked_overrides("python -m flows.pipeline", __doc__, argv, check_versionable)
    if overrides is None:
        return 2
    result = training_pipeline(overrides)
    print(f"mlflow run id:  {result['run_id']}")
    print(f"test accuracy:  {result['test_accuracy']:.4f}")
    print(f"SavedModel:     {Path(result['savedmodel'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
