"""The pipeline's steps: the one door the Prefect flows, the CLI (`python -m tasks`) and the dvc.yaml stages go
through. Each step is a plain, typed function; the flows wrap them in Prefect tasks."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tasks.atomic import write_text_atomic
from tasks.data.prepare import prepare
from tasks.data.validate import data_signature, save_report, validate
from tasks.launch.train import config_key, train
from tasks.outputs.evaluate import evaluate
from tasks.outputs.export import export, sample_test_images
from tasks.params import Params, ParamsError, load_params
from tasks.paths import EVALUATION_DIR, GATE_FILE, METRICS_FILE, MODEL_DIR, OUTPUTS_DIR, PREPARED_DIR, SAVEDMODEL_DIR
from tasks.tracking import mlflow_store, run_log
from tasks.tracking.model_registry import GateDecision, apply_gate, log_registered_model
from tasks.versioning import dvc
from tasks.versioning.run_state import RunState, run_state
from trainer.model_io import read_train_summary
from trainer.prepared_data import read_manifest

RUN_FILE = "run.json"  # beside the trained model: the MLflow run that trained it
Report = dict[str, Any]


def convert_step(params: Params, on_line: Callable[[str], None] = print) -> bool:
    """Convert the dataset to TFRecords unless they are up to date; returns whether it was skipped."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    return result.skipped


def validate_step(data_dir: Path = PREPARED_DIR) -> Report:
    """Check every shard against the manifest; returns the report (raises DataInvalid naming the shard)."""
    return validate(data_dir)


def validation_key(data_dir: Path = PREPARED_DIR) -> str:
    """What a cached validation is keyed by: the data's signature."""
    return data_signature(data_dir)


def prepare_step(params: Params, on_line: Callable[[str], None] = print,
                 convert: Callable[[Params], bool] | None = None,
                 check: Callable[[Path], Report] = validate_step) -> Report:
    """Convert (unless up to date) and validate the data; the report is saved beside it and returned.

    A caller may wrap the two halves (the flow runs them as Prefect tasks, validation cached by `validation_key`).
    """
    skipped = convert(params) if convert else convert_step(params, on_line)
    report = check(PREPARED_DIR)
    save_report(report, PREPARED_DIR)
    return report | {"skipped": skipped}


def check_versionable(params: Params) -> None:
    """Data params must be those of params.yaml: DVC records the prepare stage from that file."""
    if params.data != load_params().data:
        raise ParamsError("data.* overrides cannot be versioned by DVC: change them in params.yaml")


def version_step() -> dvc.DataVersion:
    """Record the prepared data in dvc.lock and push it to the DVC remote; returns its version."""
    return dvc.version_data()


def state_step(params: Params, version: dvc.DataVersion | None = None) -> RunState:
    """What a training from these params would depend on: data hash, code version, params hash."""
    return run_state(params, version or dvc.data_version())


def previous_run_step(params: Params, state: RunState) -> str | None:
    """The last successful run with the same state, if any (a retraining then has nothing to do)."""
    return run_log.last_successful_run(params.tracking.experiment, state)


def train_step(params: Params, on_line: Callable[[str], None] = print, model_dir: Path = MODEL_DIR) -> str:
    """Open the MLflow run (data version from dvc.lock), train, record; returns the run id."""
    version = dvc.data_version()
    run_id = run_log.open_run(params, version, state_step(params, version))
    with mlflow_store.failing_marks_run(run_id):
        result = train(params, PREPARED_DIR, model_dir, run_id, on_line)
        scaling_key = config_key(params, read_manifest(PREPARED_DIR), with_np=False)
        run_log.log_training(run_id, params, result.summary, model_dir, scaling_key)
        write_text_atomic(model_dir / RUN_FILE, json.dumps({"run_id": run_id}))
    return run_id


def model_run_id(model_dir: Path = MODEL_DIR) -> str:
    """The MLflow run that trained the model in model_dir."""
    return json.loads((model_dir / RUN_FILE).read_text())["run_id"]


def training_history(model_dir: Path = MODEL_DIR) -> dict[str, list[float]]:
    """Per-epoch metrics of the training of the model in model_dir."""
    return read_train_summary(model_dir)["history"]


def evaluate_step(run_id: str) -> dict[str, float]:
    """Test metrics, per-class precision/recall, confusion matrix and training curves into the run;
    the test metrics also into metrics.json."""
    with mlflow_store.failing_marks_run(run_id):
        evaluation = evaluate(MODEL_DIR, PREPARED_DIR)
        run_log.log_evaluation(run_id, evaluation, training_history(MODEL_DIR), EVALUATION_DIR)
        write_text_atomic(METRICS_FILE, json.dumps(evaluation.metrics, indent=2))
    return evaluation.metrics


def export_step(run_id: str) -> Path:
    """SavedModel checked and logged. Returns the SavedModel in the artifact store."""
    with mlflow_store.failing_marks_run(run_id):
        result = export(MODEL_DIR, SAVEDMODEL_DIR, PREPARED_DIR)
        return run_log.log_export(run_id, result.path, result.max_abs_diff)


def register_step(run_id: str, params: Params) -> GateDecision:
    """Log the SavedModel as an MLflow model, register it, apply the promotion gate; the run is finished."""
    with mlflow_store.failing_marks_run(run_id):
        example = sample_test_images(PREPARED_DIR, MODEL_DIR, limit=2)
        version = log_registered_model(run_id, SAVEDMODEL_DIR, example, params.registry.model_name)
        test_accuracy = mlflow_store.client().get_run(run_id).data.metrics["test_accuracy"]
        decision = apply_gate(params.registry.model_name, version, test_accuracy, params.registry.min_delta)
        run_log.log_gate(run_id, decision)
        write_text_atomic(GATE_FILE, json.dumps(decision.as_dict(), indent=2))
    mlflow_store.end_run(run_id, ok=True)
    return decision


def record_outputs_step(params: Params) -> bool:
    """Record the train/evaluate/export/register outputs in dvc.lock when they were made from params.yaml as it
    stands; returns whether they were recorded."""
    if params.train != load_params().train:
        return False
    dvc.commit_stages("train", "evaluate", "export", "register")
    return True


def run_link(params: Params, run_id: str) -> str:
    """The MLflow UI page of a run (`make ui`)."""
    experiment = mlflow_store.experiment_id(params.tracking.experiment)
    return f"{params.tracking.ui_url}/#/experiments/{experiment}/runs/{run_id}"


def scaling_train_step(params: Params, on_line: Callable[[str], None] = print) -> str:
    """One finished training run at params.train.np, in its own model directory, for a scaling report."""
    run_id = train_step(params, on_line, model_dir=OUTPUTS_DIR / "scaling" / f"np{params.train.np}")
    mlflow_store.end_run(run_id, ok=True)
    return run_id


def scaling_report_step(params: Params, runs: list[tuple[int, str]]) -> tuple[list[dict[str, Any]], str]:
    """The scaling table of (np, run id) pairs, logged as a `scaling` MLflow run; (rows, that run's id)."""
    from tasks.tracking.scaling import log_report, scaling_rows
    rows = scaling_rows(runs)
    return rows, log_report(params.tracking.experiment, rows, OUTPUTS_DIR / "scaling")


def restore_step(run_id: str | None, data_hash: str | None) -> tuple[str, Path]:
    """Bring back the prepared data of a past run (by MLflow run id) or of a DVC hash; (hash, where)."""
    if run_id:
        data_hash = mlflow_store.client().get_run(run_id).data.params["data_hash"]
    if not data_hash:
        raise ParamsError("restore needs --run-id or --data-hash")
    return data_hash, dvc.restore_data(data_hash)


def compare_step(params: Params, count: int, csv_path: Path) -> str:
    """The last `count` training runs side by side (also written as CSV)."""
    from tasks.tracking.compare import compare
    return compare(params.tracking.experiment, count, csv_path)
