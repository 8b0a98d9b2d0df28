"""What a run records in MLflow: resolved params, data and code version, outputs and artifacts."""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import yaml

from tasks.atomic import atomic_dir
from tasks.data.validate import REPORT_NAME
from tasks.launch.output.communication import COMMUNICATION_TAG, communication_advice, communication_figures
from tasks.outputs.charts import confusion_matrix_png, training_curves_png
from tasks.outputs.evaluate import Evaluation
from tasks.params import Params
from tasks.paths import PREPARED_DIR, WORKSPACE
from tasks.tracking import mlflow_store
from tasks.tracking.model_registry import GateDecision
from tasks.tracking.run_labels import COMMAND, RunSource, dataset_input, run_name, section_params, source_tags
from tasks.user_code import SOURCE_DIR, code_file, named_code, source_line
from tasks.versioning.dvc import DataVersion
from tasks.versioning.run_state import RunState
from trainer.config import CONFIG_FILE_NAME
from trainer.model_io import MODEL_SPEC, MODEL_WEIGHTS, TRAIN_SUMMARY, steady_images_per_sec
from trainer.prepared_data import MANIFEST_NAME, read_manifest
from trainer.reference import REFERENCE

REFERENCE_ARTIFACT = f"evaluation/{REFERENCE}"  # what a drift monitor compares the served items with
STATE_TAG = "ringflow.state_key"  # the run's RunState.key: what the retraining skip looks up
RESOLVED_KEYS = ("world_size", "global_batch_size", "warmup_start_learning_rate", "warmup_steps", "steps_per_epoch",
                 "resumed_from_epoch", "records_per_rank", "dropped_per_rank")  # what the job made of the params


def open_run(params: Params, version: DataVersion, state: RunState, source: RunSource = COMMAND,
             tags: dict[str, str] | None = None, name_prefix: str = "", gpus_per_host: int = 0) -> str:
    """Create the MLflow run of one pipeline run: named for what it trains (after `name_prefix`, e.g. a sweep's
    trial number), its params by section, the data as its dataset input, what started it (and at which commit),
    the data hash, the state key, and the given tags (a sweep's trial: its parent run). `gpus_per_host`: what
    preflight found, which makes the global batch of single-process backends."""
    manifest = read_manifest(PREPARED_DIR)
    tags = {**source_tags(source, version.git_commit), "ringflow.data_hash": version.data_hash,
            "ringflow.git_dirty": str(version.git_dirty).lower(), STATE_TAG: state.key,
            "ringflow.code_digest": state.code_digest, "ringflow.params_hash": state.params_hash,
            "ringflow.host": socket.gethostname(),  # the machine that ran the pipeline (a remote worker's host)
            **(tags or {})}
    model_source = source_line(params)
    logged = section_params(params) | {"data_hash": version.data_hash, "git_commit": version.git_commit,
                                       "params_hash": state.params_hash, "code_digest": state.code_digest,
                                       "data_skipped_images": len(manifest.get("skipped", []))} | \
        ({"model.source": model_source} if model_source else {})
    run_id = mlflow_store.start_run(params.tracking.experiment, logged, tags)
    with mlflow_store.failing_marks_run(run_id):  # a run left half-made is not left RUNNING
        mlflow_client = mlflow_store.client()
        name = run_name(params, run_id, gpus_per_host)
        mlflow_client.update_run(run_id, name=f"{name_prefix}-{name}" if name_prefix else name)
        log_prepared_dataset(run_id, params, version.data_hash, manifest)
        mlflow_client.log_text(run_id, yaml.safe_dump(params.model_dump(), sort_keys=False), "params.resolved.yaml")
        for name in (MANIFEST_NAME, REPORT_NAME):
            if (PREPARED_DIR / name).is_file():
                mlflow_store.log_artifacts(run_id, PREPARED_DIR / name, "data")
        for role, code in named_code(params).items():  # the user's code as it was when the run started
            mlflow_store.log_artifacts(run_id, code_file(code), f"{SOURCE_DIR}/{role}")
    return run_id


def log_prepared_dataset(run_id: str, params: Params, data_hash: str, manifest: dict[str, Any] | None = None) -> None:
    """The prepared data (data/prepared, its manifest) as the run's dataset input."""
    prepared = PREPARED_DIR.relative_to(WORKSPACE.root).as_posix()
    manifest = read_manifest(PREPARED_DIR) if manifest is None else manifest
    mlflow_store.log_dataset(run_id, dataset_input(params, data_hash, prepared, manifest))


def last_successful_run(experiment: str, state: RunState) -> str | None:
    """The newest FINISHED run trained from the same data, code and params, if any."""
    runs = mlflow_store.newest_runs(experiment, f"tags.`{STATE_TAG}` = '{state.key}' "
                                                "and attributes.status = 'FINISHED'")
    return runs[0].info.run_id if runs else None


def last_finished_state(experiment: str) -> dict[str, str]:
    """The recorded state (data_hash, code_digest, params_hash) of the newest FINISHED training run ({} if none)."""
    runs = mlflow_store.newest_runs(experiment, "params.data_hash != '' and attributes.status = 'FINISHED'")
    if not runs:
        return {}
    params = runs[0].data.params
    return {key: params.get(key, "") for key in ("data_hash", "code_digest", "params_hash")} | \
        {"run_id": runs[0].info.run_id}


def interrupted_runs(experiment: str) -> list[Any]:
    """Training runs that did not finish (FAILED, or RUNNING after a hard stop), newest first."""
    return mlflow_store.newest_runs(experiment, "params.data_hash != '' and attributes.status != 'FINISHED'",
                                    max_results=20)


def single_process_rate(experiment: str, key: str) -> float | None:
    """images_per_sec_steady of the latest finished np=1 run with this config key, if any."""
    runs = mlflow_store.newest_runs(experiment, f"params.scaling_key = '{key}' and params.`train.np` = '1' "
                                            "and attributes.status = 'FINISHED'")
    return runs[0].data.metrics.get("images_per_sec_steady") if runs else None


def log_training(run_id: str, params: Params, summary: dict[str, Any], model_dir: Path, scaling_key: str) -> None:
    """Resolved distributed values, throughput and scaling efficiency, the model's files, TensorBoard logs."""
    resolved = {key: summary[key] for key in RESOLVED_KEYS} | {"scaled_learning_rate": summary["learning_rate"]} \
        | summary.get("tuning", {})  # what each rank applied of the job's tuning, the model's gradient size
    mlflow_store.log_params(run_id, {f"resolved.{key}": value for key, value in resolved.items()}
                            | {"scaling_key": scaling_key})
    if summary["history"].get("images_per_sec"):  # none when the run was finished from its checkpoints
        steady = steady_images_per_sec(summary["history"])
        metrics = {"images_per_sec_steady": steady, **communication_figures(summary)}
        reference = single_process_rate(params.tracking.experiment, scaling_key)
        if reference and params.train.np > 1:
            metrics["scaling_efficiency"] = steady / (params.train.np * reference)
        mlflow_store.log_metrics(run_id, metrics)
        if advice := communication_advice(summary, params.train.batch_size):
            mlflow_store.set_tags(run_id, {COMMUNICATION_TAG: advice})
    for name in (MODEL_SPEC, MODEL_WEIGHTS, TRAIN_SUMMARY, CONFIG_FILE_NAME):
        mlflow_store.log_artifacts(run_id, model_dir / name, "model")
    if (model_dir / "tensorboard").is_dir():
        mlflow_store.log_artifacts(run_id, model_dir / "tensorboard", "tensorboard")


def log_export(run_id: str, savedmodel: Path, max_abs_diff: float) -> str:
    """The SavedModel as run artifacts; returns where the artifact store holds it."""
    mlflow_store.log_metrics(run_id, {"export_max_abs_diff": max_abs_diff})
    mlflow_store.log_artifacts(run_id, savedmodel, "savedmodel")
    return mlflow_store.artifact_location(run_id, "savedmodel")


def metric_name(text: str) -> str:
    """A class name as MLflow allows it in a metric key."""
    return "".join(char if char.isalnum() or char in "_-./" else "_" for char in text)


def log_evaluation(run_id: str, evaluation: Evaluation, history: dict[str, list[float]], work_dir: Path,
                   reference: Path | None = None) -> None:
    """Test metrics; a classifier's per-class precision/recall (metrics and JSON) and confusion-matrix PNG, a
    regressor's per-target scores (JSON); the training-curves PNG; the drift monitor's reference (REFERENCE_ARTIFACT,
    when the training kept one)."""
    per_class_metrics = {f"test_{score}_{metric_name(name)}": values[score]
                         for name, values in evaluation.per_class.items() for score in ("precision", "recall")}
    mlflow_store.log_metrics(run_id, evaluation.metrics | per_class_metrics)
    with atomic_dir(work_dir) as tmp:
        if evaluation.task == "regression":
            (tmp / "per_target.json").write_text(json.dumps(evaluation.per_target, indent=2))
        else:
            (tmp / "per_class.json").write_text(json.dumps(evaluation.per_class, indent=2))
            (tmp / "confusion_matrix.json").write_text(json.dumps(
                {"classes": evaluation.class_names, "matrix": evaluation.confusion.tolist()}))
            confusion_matrix_png(evaluation.confusion, evaluation.class_names, tmp / "confusion_matrix.png")
        training_curves_png(history, tmp / "training_curves.png")
        if reference is not None and reference.is_file():
            shutil.copyfile(reference, tmp / reference.name)
    mlflow_store.log_artifacts(run_id, work_dir, "evaluation")


def log_gate(run_id: str, decision: GateDecision) -> None:
    """The promotion decision, both values of its metric on the same test split and that split's hash as run tags
    (a classifier's by default as ever: ringflow.gate.test_accuracy, ringflow.gate.champion_accuracy ...)."""
    short = decision.metric.removeprefix("test_")
    gate = {"model_version": decision.version, "decision": decision.alias,
            "champion_version": decision.champion_version, f"champion_{short}": decision.champion_value,
            decision.metric: decision.value, "test_split": decision.test_split, "min_delta": decision.min_delta,
            "metric": decision.metric, "mode": decision.mode}
    mlflow_store.set_tags(run_id, {f"ringflow.gate.{key}": value for key, value in gate.items()})


# MLflow 3.17's UI shows an experiment in the view its browser last chose (GenAI, the default, opens on traces and
# token usage whatever the experiment's kind tag says); this query parameter opens its model-training view, the runs.
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


def run_link(params: Params, run_id: str) -> str:
    """The MLflow UI page of a run (`make ui`)."""
    experiment = mlflow_store.experiment_id(params.tracking.experiment)
    return f"{params.tracking.ui_url}/#/experiments/{experiment}/runs/{run_id}?{MODEL_TRAINING_VIEW}"


def runs_link(params: Params) -> str:
    """The MLflow UI page of the experiment's training runs (what `make ui` says to open)."""
    experiment = mlflow_store.experiment_id(params.tracking.experiment)
    return f"{params.tracking.ui_url}/#/experiments/{experiment}/runs?{MODEL_TRAINING_VIEW}"
