"""The pipeline's steps as the CLI and the dvc.yaml stages run them (the Prefect flow runs the same functions)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from tasks import record, tracking
from tasks.atomic import write_text_atomic
from tasks.evaluate import evaluate
from tasks.export import export, sample_test_images
from tasks.params import Params
from tasks.paths import EVALUATION_DIR, GATE_FILE, METRICS_FILE, MODEL_DIR, PREPARED_DIR, SAVEDMODEL_DIR
from tasks.prepare import prepare
from tasks.registry import GateDecision, apply_gate, log_registered_model
from tasks.train import config_key, train
from tasks.validate import REPORT_NAME, validate
from tasks.version import data_version
from trainer.records import MANIFEST_NAME, read_manifest

RUN_FILE = "run.json"


def convert_step(params: Params, on_line: Callable[[str], None] = print) -> bool:
    """Convert the dataset to TFRecords unless they are up to date; returns whether it was skipped."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    return result.skipped


def data_signature(data_dir: Path = PREPARED_DIR) -> str:
    """Digest of the manifest (every shard's sha256) and of each file's size and mtime: changes when the data
    version changes or any file is rewritten, so a cached validation never stands for other bytes."""
    digest = hashlib.sha256((data_dir / MANIFEST_NAME).read_bytes())
    for path in sorted(data_dir.glob("*.tfrecord")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def save_validation_report(report: dict[str, Any], data_dir: Path = PREPARED_DIR) -> None:
    """The report beside the data (same data, same bytes)."""
    write_text_atomic(data_dir / REPORT_NAME, json.dumps(report, indent=2))


def prepare_step(params: Params, on_line: Callable[[str], None] = print) -> dict[str, Any]:
    """Convert (unless up to date) and validate the data; returns the validation report, also saved beside it."""
    skipped = convert_step(params, on_line)
    report = validate(PREPARED_DIR)
    save_validation_report(report)
    return report | {"skipped": skipped}


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
    """Test metrics, per-class precision/recall, confusion matrix and training curves into the run;
    the test metrics also into metrics.json."""
    with tracking.failing_marks_run(run_id):
        evaluation = evaluate(MODEL_DIR, PREPARED_DIR)
        history = json.loads((MODEL_DIR / "train_summary.json").read_text())["history"]
        record.log_evaluation(run_id, evaluation, history, EVALUATION_DIR)
        write_text_atomic(METRICS_FILE, json.dumps(evaluation.metrics, indent=2))
    return evaluation.metrics


def export_step(run_id: str) -> Path:
    """SavedModel checked and logged. Returns the SavedModel in the artifact store."""
    with tracking.failing_marks_run(run_id):
        result = export(MODEL_DIR, SAVEDMODEL_DIR, PREPARED_DIR)
        return record.log_export(run_id, result.path, result.max_abs_diff)


def register_step(run_id: str, params: Params) -> GateDecision:
    """Log the SavedModel as an MLflow model, register it, apply the promotion gate; the run is finished."""
    with tracking.failing_marks_run(run_id):
        example = sample_test_images(PREPARED_DIR, MODEL_DIR, limit=2)
        version = log_registered_model(run_id, SAVEDMODEL_DIR, example, params.registry.model_name)
        test_accuracy = tracking.client().get_run(run_id).data.metrics["test_accuracy"]
        decision = apply_gate(params.registry.model_name, version, test_accuracy, params.registry.min_delta)
        record.log_gate(run_id, decision)
        write_text_atomic(GATE_FILE, json.dumps(decision.as_dict(), indent=2))
    tracking.end_run(run_id, ok=True)
    return decision
