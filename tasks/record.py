"""What a run records in MLflow: resolved params, data and code version, outputs and artifacts."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tasks import tracking
from tasks.params import Params
from tasks.paths import PREPARED_DIR
from tasks.validate import REPORT_NAME
from tasks.version import DataVersion
from trainer.records import MANIFEST_NAME


def run_params(params: Params) -> dict[str, Any]:
    """Training params by their plain names (`np`, `epochs`, ...), data and input params as `data.*`, `input.*`."""
    logged = dict(params.train.model_dump())
    for section in ("data", "input"):
        logged.update({f"{section}.{key}": value for key, value in getattr(params, section).model_dump().items()})
    return logged


def open_run(params: Params, version: DataVersion) -> str:
    """Create the MLflow run of one pipeline run, with params, data hash and git commit."""
    tags = {"mlflow.source.git.commit": version.git_commit, "ringflow.data_hash": version.data_hash,
            "ringflow.git_dirty": str(version.git_dirty).lower()}
    logged = run_params(params) | {"data_hash": version.data_hash, "git_commit": version.git_commit}
    run_id = tracking.start_run(params.tracking.experiment, logged, tags)
    tracking.client().log_text(run_id, yaml.safe_dump(params.model_dump(), sort_keys=False), "params.resolved.yaml")
    for name in (MANIFEST_NAME, REPORT_NAME):
        if (PREPARED_DIR / name).is_file():
            tracking.log_artifacts(run_id, PREPARED_DIR / name, "data")
    return run_id


def log_training(run_id: str, summary: dict[str, Any], model_dir: Path) -> None:
    """Resolved distributed values and the trained model's files."""
    tracking.log_params(run_id, {"world_size": summary["world_size"],
                                 "global_batch_size": summary["global_batch_size"],
                                 "scaled_learning_rate": summary["learning_rate"],
                                 "steps_per_epoch": summary["steps_per_epoch"]})
    for name in ("model.json", "model.weights.h5", "train_summary.json"):
        tracking.log_artifacts(run_id, model_dir / name, "model")


def log_export(run_id: str, savedmodel: Path, max_abs_diff: float) -> Path:
    """The SavedModel as run artifacts; returns its path inside the artifact store."""
    tracking.log_metrics(run_id, {"export_max_abs_diff": max_abs_diff})
    tracking.log_artifacts(run_id, savedmodel, "savedmodel")
    return tracking.artifact_dir(run_id) / "savedmodel"
