"""The pipeline's steps: the one door the Prefect flows, the CLI (`python -m tasks`) and the dvc.yaml stages go
through. Each step is a plain, typed function; the flows wrap them in Prefect tasks.

A pipeline run is one MLflow run: open_run_step creates it (or reopens the run to resume); train, evaluate,
export and register write only into its workspace (outputs/runs/<run id>/); publish_step copies the results to
the fixed paths, records them in DVC and only then marks the run FINISHED.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tasks.atomic import file_lock, lock_held, write_text_atomic
from tasks.data.prepare import prepare
from tasks.data.validate import data_signature, save_report, validate
from tasks.launch.plan import data_plan_lines, describe_launch
from tasks.launch.preflight import PreflightError, preflight
from tasks.launch.train import check_resumable, checkpoint_owner, config_key, train
from tasks.outputs.evaluate import evaluate, split_hash
from tasks.outputs.export import export, sample_test_images
from tasks.outputs.publish import exclusive, published, published_run
from tasks.params import Params, ParamsError, load_params
from tasks.paths import LOCKS_DIR, OUTPUTS_DIR, PREPARED_DIR
from tasks.tracking import mlflow_store, model_registry, run_log
from tasks.tracking.model_registry import GateDecision
from tasks.versioning import dvc
from tasks.versioning.run_state import RunState, run_state
from tasks.workspace import RunWorkspace
from trainer.config import CONFIG_FILE_NAME
from trainer.model_io import read_train_summary
from trainer.prepared_data import read_manifest

RUN_FILE = "run.json"  # beside the trained model: the MLflow run that trained it
PUBLISHED_ITEMS = ["model", "evaluation", "savedmodel", "metrics.json", "gate.json"]
STAGE_PARAMS = ("data", "input", "train", "registry")  # the params dvc.yaml's stages record
Report = dict[str, Any]


def convert_step(params: Params, on_line: Callable[[str], None] = print) -> bool:
    """Convert the dataset to TFRecords unless they are up to date; returns whether it was skipped."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    if line := left_out_line(result.manifest, PREPARED_DIR):
        on_line(line)
    return result.skipped


def left_out_line(manifest: dict[str, Any], data_dir: Path) -> str | None:
    """The images data.bad_images: skip left out of the data, in one line (None: none)."""
    left_out = manifest.get("skipped")
    if not left_out:
        return None
    names = ", ".join(bad["file"] for bad in left_out[:3]) + (", ..." if len(left_out) > 3 else "")
    return (f"{len(left_out)} image(s) left out because they cannot be decoded (data.bad_images: skip), listed in "
            f"{data_dir / 'manifest.json'}: {names}")


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

    One process at a time prepares this checkout's data. A caller may wrap the two halves (the flow runs them as
    Prefect tasks, validation cached by `validation_key`).
    """
    with file_lock(LOCKS_DIR / "prepare.lock"):
        skipped = convert(params) if convert else convert_step(params, on_line)
        report = check(PREPARED_DIR)
        save_report(report, PREPARED_DIR)
    return report | {"skipped": skipped}


def preflight_step(params: Params) -> str | None:
    """Everything that can be checked against the prepared data before a run exists: model input size, global
    batch, hosts, the Horovod build, a run to resume. Returns the Horovod controller (None: tf.distribute)."""
    controller = preflight(params, PREPARED_DIR)
    if params.train.resume_from:
        checkpoints = resumable_run(params, params.train.resume_from).checkpoint_dir
        check_resumable(params, checkpoints, checkpoint_owner(params, read_manifest(PREPARED_DIR)))
    return controller


def data_plan_step(params: Params) -> list[str]:
    """Each rank's share of the training split per epoch: records, steps, records dropped."""
    return data_plan_lines(params, read_manifest(PREPARED_DIR))


def dry_run_step(params: Params, on_line: Callable[[str], None] = print) -> list[str]:
    """Prepare and preflight, then the launch plan (each process's host and command) and the per-rank data plan,
    without opening a run or training."""
    prepare_step(params, on_line)
    controller = preflight_step(params)
    config_file = RunWorkspace("<run id>").model_dir / CONFIG_FILE_NAME
    return ["launch:", *describe_launch(params, controller, config_file), "data:", *data_plan_step(params)]


def check_versionable(params: Params) -> None:
    """Data params must be those of params.yaml: DVC records the prepare stage from that file."""
    if params.data != load_params().data:
        raise ParamsError("data.* overrides cannot be versioned by DVC: change them in params.yaml")


def version_step() -> dvc.DataVersion:
    """Record the prepared data in dvc.lock and push it to the DVC remote; returns its version."""
    return dvc.version_data()


def state_step(params: Params, version: dvc.DataVersion | None = None) -> RunState:
    """What a training from these params would depend on: data hash, code digest, params hash."""
    return run_state(params, version or dvc.data_version())


def previous_run_step(params: Params, state: RunState) -> str | None:
    """The last successful run with the same state, if any (a retraining then has nothing to do)."""
    return run_log.last_successful_run(params.tracking.experiment, state)


def changes_step(params: Params, state: RunState) -> list[str]:
    """Which of data, code and params changed since the newest finished run (all three when there is none)."""
    return state.changes_from(run_log.last_finished_state(params.tracking.experiment))


def resumable_run(params: Params, run_id: str) -> RunWorkspace:
    """The workspace of an unfinished run of this experiment to continue; PreflightError when there is none."""
    from mlflow.exceptions import MlflowException
    try:
        run = mlflow_store.client().get_run(run_id)
    except MlflowException:
        raise PreflightError(f"train.resume_from: no MLflow run {run_id}") from None
    if run.info.experiment_id != mlflow_store.experiment_id(params.tracking.experiment):
        raise PreflightError(f"train.resume_from: run {run_id} is not in experiment {params.tracking.experiment}")
    if run.info.status == "FINISHED":
        raise PreflightError(f"train.resume_from: run {run_id} has finished; start a new run instead")
    workspace = RunWorkspace(run_id)
    if lock_held(workspace.training_lock):
        raise PreflightError(f"train.resume_from: run {run_id} is training right now")
    if not (workspace.checkpoint_dir / "checkpoint").is_file():
        raise PreflightError(f"train.resume_from: run {run_id} saved no checkpoint in {workspace.checkpoint_dir}")
    return workspace


def interrupted_run_step(params: Params) -> str:
    """The newest unfinished training run that saved a checkpoint (what `--resume` continues)."""
    for run in run_log.interrupted_runs(params.tracking.experiment):
        workspace = RunWorkspace(run.info.run_id)
        if (workspace.checkpoint_dir / "checkpoint").is_file() and not lock_held(workspace.training_lock):
            return run.info.run_id
    raise PreflightError(f"--resume: no interrupted run with a checkpoint in experiment {params.tracking.experiment}")


def open_run_step(params: Params, version: dvc.DataVersion | None = None, state: RunState | None = None) -> str:
    """The MLflow run of this pipeline run: a new one, or the run named by train.resume_from, reopened."""
    if params.train.resume_from:
        run_id = resumable_run(params, params.train.resume_from).run_id
        mlflow_store.reopen_run(run_id)
        return run_id
    version = version or dvc.data_version()
    run_id = run_log.open_run(params, version, state or run_state(params, version))
    mlflow_store.client().log_text(run_id, "\n".join(data_plan_step(params)) + "\n", "data_plan.txt")
    return run_id


def train_step(params: Params, run_id: str, on_line: Callable[[str], None] = print) -> Path:
    """Train into the run's workspace, resuming from its own last checkpoint when it has one (a retry, a resume);
    record the training in the run. Returns the model directory."""
    workspace = RunWorkspace(run_id)
    mlflow_store.reopen_run(run_id)
    with mlflow_store.failing_marks_run(run_id), file_lock(workspace.training_lock):
        result = train(params, PREPARED_DIR, workspace.model_dir, workspace.checkpoint_dir, run_id, on_line)
        scaling_key = config_key(params, read_manifest(PREPARED_DIR), with_np=False)
        run_log.log_training(run_id, params, result.summary, workspace.model_dir, scaling_key)
        write_text_atomic(workspace.model_dir / RUN_FILE, json.dumps({"run_id": run_id}))
    return workspace.model_dir


def training_history(run_id: str) -> dict[str, list[float]]:
    """Per-epoch metrics of the run's training."""
    return read_train_summary(RunWorkspace(run_id).model_dir)["history"]


def evaluate_step(run_id: str) -> dict[str, float]:
    """Test metrics, per-class precision/recall, confusion matrix and training curves into the run and its
    workspace (metrics.json, evaluation/)."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        evaluation = evaluate(workspace.model_dir, PREPARED_DIR)
        run_log.log_evaluation(run_id, evaluation, training_history(run_id), workspace.evaluation_dir)
        write_text_atomic(workspace.metrics_file, json.dumps(evaluation.metrics, indent=2))
    return evaluation.metrics


def export_step(run_id: str) -> Path:
    """SavedModel checked (into the workspace) and logged. Returns the SavedModel in the artifact store."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        result = export(workspace.model_dir, workspace.savedmodel_dir, PREPARED_DIR)
        return run_log.log_export(run_id, result.path, result.max_abs_diff)


def register_step(run_id: str, params: Params) -> GateDecision:
    """Register the SavedModel as a new model version and decide the gate: the champion is scored on this run's
    test split. The decision goes to the workspace (gate.json); the alias is given when the run is published."""
    workspace, registry = RunWorkspace(run_id), params.registry
    with mlflow_store.failing_marks_run(run_id):
        example = sample_test_images(PREPARED_DIR, workspace.model_dir, limit=2)
        version = model_registry.log_registered_model(run_id, workspace.savedmodel_dir, example,
                                                       registry.model_name)
        accuracy = json.loads(workspace.metrics_file.read_text())["test_accuracy"]
        decision = model_registry.decide_gate(
            registry.model_name, version, accuracy, registry.min_delta, split_hash(read_manifest(PREPARED_DIR)),
            lambda champion: model_registry.score_registered_model(champion, PREPARED_DIR))
        write_text_atomic(workspace.gate_file, json.dumps(decision.as_dict(), indent=2))
    return decision


def dvc_record_blockers(params: Params) -> list[str]:
    """The stage params that differ from params.yaml (dvc.lock can only record params.yaml's values)."""
    written = load_params()
    return [f"{section}.{key}" for section in STAGE_PARAMS
            for key, value in getattr(params, section).model_dump().items()
            if getattr(written, section).model_dump()[key] != value]


def record_outputs(params: Params, run_id: str) -> str:
    """Record the published outputs in dvc.lock when they were made from params.yaml as it stands; returns what
    was done, also tagged on the run."""
    blockers = dvc_record_blockers(params)
    if blockers:
        outcome = f"dvc.lock left alone: {', '.join(blockers)} differ from params.yaml"
    else:
        dvc.commit_stages("train", "evaluate", "export", "register")
        outcome = "recorded in dvc.lock and pushed"
    mlflow_store.set_tags(run_id, {"ringflow.dvc_record": outcome})
    return outcome


def publish_step(params: Params, run_id: str, names: list[str] = PUBLISHED_ITEMS, record: bool = True) -> str:
    """Publish the run's outputs to the fixed paths and record them in DVC, all or nothing under a lock; give the
    new model version its alias; only then mark the run FINISHED. Returns what happened to dvc.lock."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        with exclusive(), published(workspace, names):
            outcome = record_outputs(params, run_id) if record else "dvc.lock is written by dvc repro"
        if "gate.json" in names:
            decision = GateDecision(**json.loads(workspace.gate_file.read_text()))
            model_registry.apply_gate(decision)
            run_log.log_gate(run_id, decision)
    if "gate.json" in names:
        mlflow_store.end_run(run_id, ok=True)
    return outcome


def published_run_step() -> str:
    """The run whose model is published now (what the next dvc stage works on)."""
    return published_run("model")


def scaling_train_step(params: Params, on_line: Callable[[str], None] = print) -> str:
    """One finished training run at params.train.np, in its own workspace, for a scaling report."""
    run_id = open_run_step(params)
    train_step(params, run_id, on_line)
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


def run_link(params: Params, run_id: str) -> str:
    """The MLflow UI page of a run (`make ui`)."""
    experiment = mlflow_store.experiment_id(params.tracking.experiment)
    return f"{params.tracking.ui_url}/#/experiments/{experiment}/runs/{run_id}"
