"""The pipeline's steps as the CLI and the dvc.yaml stages run them (the Prefect flow runs the same functions)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tasks import record, tracking
from tasks.atomic import write_text_atomic
from tasks.evaluate import evaluate
from tasks.export import export
from tasks.params import Params
from tasks.paths import METRICS_FILE, MODEL_DIR, PREPARED_DIR, SAVEDMODEL_DIR
from tasks.prepare import prepare
from tasks.train import config_key, train
from tasks.validate import REPORT_NAME, validate
from tasks.version import data_version
from trainer.records import read_manifest

RUN_FILE = "run.json"


def prepare_step(params: Params, on_line: Callable[[str], None] = print) -> dict[str, Any]:
    """Convert (unless up to date) and validate the data; returns the validation report, also saved beside it."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    report = validate(PREPARED_DIR)
    write_text_atomic(PREPARED_DIR / REPORT_NAME, json.dumps(report, indent=2))  # same data, same bytes
    return report | {"skipped": result.skipped}


def train_step(params: Params, on_line: Callable[[str], None] = print, model_dir: Path = MODEL_DIR) -> str:
    """Open the MLflow run (data version from dvc.lock), train, record; returns the run id."""
    run_id = record.open_run(params, data_version())
    with tracking.failing_marks_run(run_id):
        result = train(params, PREPARED_DIR, model_dir, run_id, on_line)
        manifest = read_manifest(PREPARED_DIR)
        record.log_training(run_id, params, result.summary, model_dir, config_key(params, manifest, with_np=False))
        write_text_atomic(model_dir / RUN_FILE, json.dumps({"run_id": run_id}))
    return run_id


def model_run_id(model_dir: Path = MODEL_DIR) -> str:
    """The MLflow run that trained the model in model_dir."""
    return json.loads((model_dir / RUN_FILE).read_text())["run_id"]


def evaluate_step(run_id: str) -> dict[str, float]:
    """Test metrics into the run and metrics.json."""
    with tracking.failing_marks_run(run_id):
        metrics = evaluate(MODEL_DIR, PREPARED_DIR)
        tracking.log_metrics(run_id, metrics)
        write_text_atomic(METRICS_FILE, json.dumps(metrics, indent=2))
    return metrics


def export_step(run_id: str) -> Path:
    """SavedModel checked and logged; the run is finished. Returns the SavedModel in the artifact store."""
    with tracking.failing_marks_run(run_id):
        result = export(MODEL_DIR, SAVEDMODEL_DIR, PREPARED_DIR)
        path = record.log_export(run_id, result.path, result.max_abs_diff)
    tracking.end_run(run_id, ok=True)
    return path
