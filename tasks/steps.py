"""The pipeline's steps: the one door the Prefect flows, the CLI (`python -m tasks`) and the dvc.yaml stages go
through. Each step is a plain, typed function; the flows wrap them in Prefect tasks. The policy lives in the stage
folders (tasks/data, tasks/launch, tasks/tracking, tasks/versioning, tasks/outputs); a step only chains them.

The order of the steps is written once, here: STEPS, each declared with what it gives the steps after it and what
it publishes (prepare runs before them, once for one run or many: PIPELINE_STEPS). run_steps is the one driver for
every entry point, which names the steps it runs (the flow: CHECKS, then OPENED; a sweep's trial and a scaling run:
TRAINING_RUN; a sweep's best trial: AFTER_TRAINING; a dvc.yaml stage: stage_steps) and how each runs (the flows: a
Prefect task per step). A pipeline run is one MLflow run: open-run creates it (or reopens the run to resume); the
steps inside it (RUN_STEPS) write only into its workspace (outputs/runs/<run id>/); publish copies the results to
the fixed paths, records them in DVC and only then marks the run FINISHED.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection

from tasks.atomic import file_lock, write_text_atomic
from tasks.data.data_lock import DataHolder, prepared_data_lock
from tasks.data.prepare import fingerprint, left_out_line, prepare, up_to_date
from tasks.data.validate import save_report, validate
from tasks.launch.hostlist import host_slots, listed
from tasks.launch.job import train
from tasks.launch.job_config import check_resumable, checkpoint_owner, config_key, trained_already
from tasks.launch.plan import data_plan_lines, describe_launch, listening_lines
from tasks.launch.preflight import LaunchCheck, Probed, check_launch, dry_run_check, probe_hosts, unchecked_hosts
from tasks.outputs.evaluate import check_trained_on, evaluate, outputs_written, split_hash
from tasks.outputs.export import close_fresh_process, export, fresh_process, parity_sample
from tasks.outputs.publish import exclusive, published
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR, PREPARED_DIR
from tasks.tracking import mlflow_store, model_registry, run_log
from tasks.tracking.metric_catchup import catching_up_metrics
from tasks.tracking.model_registry import GateDecision
from tasks.tracking.resume import resumable_run
from tasks.tracking.run_labels import COMMAND, RunSource, system_metrics
from tasks.versioning import dvc
from tasks.versioning.dvc_record import record_outputs
from tasks.versioning.run_state import RunState, run_state
from tasks.workspace import RunWorkspace
from trainer.config import CONFIG_FILE_NAME
from trainer.model_io import read_spec
from trainer.prepared_data import read_manifest

RUN_FILE = "run.json"  # beside the trained model: the MLflow run that trained it
Report = dict[str, Any]
OnLine = Callable[[str], None]


@dataclass(frozen=True)
class RunLabels:
    """How a new MLflow run is labelled: what started it (MLflow's Source column), its tags (a sweep's trial: its
    parent run), its name's prefix (the trial's number)."""
    source: RunSource = COMMAND
    tags: dict[str, str] = field(default_factory=dict)
    name_prefix: str = ""


@dataclass(frozen=True)
class RunContext:
    """One pipeline run as its steps hand it on: the params; what earlier steps gave (preflight's check, the data
    version, the run's id) or the entry point gave instead (a sweep's data version and its hosts' answers, the run a
    dvc stage works on); and how this entry point runs it: the new run's labels and state, the data lock's holder
    (named after the run once it exists), where the training's lines go, whether the training writes what
    evaluate, export and register read (a sweep's trial or a scaling run, which end after training, need none), and
    the dvc.yaml stage it is (which publishes only its own step's items; `dvc repro` records dvc.lock)."""
    params: Params
    run_id: str = ""
    check: LaunchCheck | None = None
    version: dvc.DataVersion | None = None
    state: RunState | None = None
    labels: RunLabels = RunLabels()
    probed: Probed | None = None
    holder: DataHolder | None = None
    on_line: OnLine = print
    model_outputs: bool = True
    stage: str = ""

    def launch_check(self) -> LaunchCheck:
        if self.check is None:
            raise ValueError(f"run {self.run_id or '(not open)'}: this step needs the preflight's result")
        return self.check

    def data_version(self) -> dvc.DataVersion:
        if self.version is None:
            raise ValueError(f"run {self.run_id or '(not open)'}: this step needs the data's version")
        return self.version


@dataclass(frozen=True)
class RunStep:
    """A step of a pipeline run: what it does with the run, the field of the run its result fills for the steps
    after it, the workspace items it publishes (a dvc.yaml stage of the same name), whether a failure of it may
    pass when it runs again (from the run's last checkpoint), and how its result reads."""
    name: str
    call: Callable[[RunContext], Any]
    gives: str = ""
    publishes: tuple[str, ...] = ()
    retried: bool = False
    shown: Callable[[RunContext, Any], str] = lambda run, result: str(result)


def open_step(run: RunContext) -> str:
    """open-run as a step: the run's id; the data lock's holder is named after it."""
    run_id = open_run_step(run.params, run.launch_check(), run.version, run.state, run.labels)
    if run.holder:
        run.holder.rename(f"MLflow run {run_id}")
    return run_id


def publish_items(run: RunContext) -> str:
    """publish as a step: everything the run made, or a dvc stage's own items (dvc repro records dvc.lock)."""
    names = list(step_named(run.stage).publishes) if run.stage else PUBLISHED_ITEMS
    return publish_step(run.params, run.run_id, names, record=not run.stage)


STEPS = (
    RunStep("preflight", lambda run: preflight_step(run.params, run.probed), gives="check",
            shown=lambda run, check: "\n".join(preflight_lines(run.params, check))),
    RunStep("version", lambda run: version_step(), gives="version",
            shown=lambda run, version: f"data {version.data_hash} at git {version.git_commit} (in the DVC remote)"),
    RunStep("open-run", open_step, gives="run_id", shown=lambda run, run_id: f"MLflow run {run_id}"),
    RunStep("train", lambda run: train_step(run.params, run.run_id, run.launch_check(), run.on_line,
                                            run.model_outputs), publishes=("model",), retried=True),
    RunStep("evaluate", lambda run: evaluate_step(run.run_id), publishes=("metrics.json", "evaluation")),
    RunStep("export", lambda run: export_step(run.run_id), publishes=("savedmodel",),
            shown=lambda run, path: f"savedmodel: {path}"),
    RunStep("register", lambda run: register_step(run.run_id, run.params), publishes=("gate.json",),
            shown=lambda run, decision: decision.sentence()),
    RunStep("publish", publish_items, shown=lambda run, outcome: f"published run {run.run_id}; {outcome}"))
STEP_NAMES = tuple(step.name for step in STEPS)
PIPELINE_STEPS = ("prepare", *STEP_NAMES)  # prepare runs once before one run or many (a sweep's, a scaling's)
RUN_STEPS = tuple(step for step in STEPS if step.publishes)  # inside one MLflow run: the dvc.yaml stages
PUBLISHED_ITEMS = [item for step in RUN_STEPS for item in step.publishes]
TRAINING = "train"
CHECKS = STEP_NAMES[:STEP_NAMES.index("open-run")]  # the flow decides after them whether anything changed
OPENED = STEP_NAMES[STEP_NAMES.index("open-run"):]  # from the run's opening to its publishing
TRAINING_RUN = ("preflight", "open-run", TRAINING)  # a run that ends with its training: a sweep's trial, a scaling run
AFTER_TRAINING = STEP_NAMES[STEP_NAMES.index(TRAINING) + 1:]  # a sweep's best trial, trained already
StepRunner = Callable[[RunStep, RunContext], Any]  # how an entry point runs one step: directly, as a Prefect task


def step_named(name: str) -> RunStep:
    return next(step for step in STEPS if step.name == name)


def stage_steps(name: str) -> tuple[str, ...]:
    """The steps of a dvc.yaml stage: its own and its publishing; the training first opens its run."""
    return (*TRAINING_RUN, "publish") if name == TRAINING else (name, "publish")


def run_directly(step: RunStep, run: RunContext) -> Any:
    return step.call(run)


def run_steps(run: RunContext, names: Collection[str] = STEP_NAMES,
              runner: StepRunner = run_directly) -> tuple[RunContext, dict[str, Any]]:
    """The one driver of a pipeline run's steps, for every entry point (the flows, the command line and the
    dvc.yaml stages, a sweep's trials and its best trial, the scaling runs): those `names` in the steps' one order,
    each through `runner`, each given what the ones before gave; the run as they left it, their results by name."""
    if unknown := set(names) - set(STEP_NAMES):
        raise ValueError(f"not a step of a pipeline run: {', '.join(sorted(unknown))}")
    results: dict[str, Any] = {}
    for step in STEPS:
        if step.name in names:
            results[step.name] = runner(step, run)
            if step.gives:
                run = replace(run, **{step.gives: results[step.name]})
    return run, results


def convert_step(params: Params, on_line: OnLine = print) -> bool:
    """Convert the dataset to TFRecords unless they are up to date; returns whether it was skipped."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    if line := left_out_line(result.manifest, PREPARED_DIR):
        on_line(line)
    return result.skipped


def prepare_step(params: Params, on_line: OnLine = print, convert: Callable[[Params], bool] | None = None,
                 check: Callable[[Path], Report] = validate) -> Report:
    """Convert (unless up to date) and validate the data; the report is saved beside it and returned.

    Data already up to date is taken under the shared lock (runs that read it go on); converting takes the lock
    exclusively, after the runs that use the data (prepared_data_lock says which). A caller may wrap the two halves
    (the flow runs them as Prefect tasks, validation cached by the data's signature).
    """
    exclusive = False  # first as a reader: after another prepare's conversion, the data may be current
    while True:
        with prepared_data_lock(exclusive, "prepare", on_line):
            if exclusive or data_current(params):
                skipped = convert(params) if convert else convert_step(params, on_line)
                report = check(PREPARED_DIR)
                save_report(report, PREPARED_DIR)
                return report | {"skipped": skipped}
        exclusive = True  # not current: convert, alone


def data_current(params: Params) -> bool:
    """Whether the prepared data is up to date with the data params (nothing to convert)."""
    return up_to_date(PREPARED_DIR, fingerprint(params.data)) is not None


def preflight_step(params: Params, probed: Probed | None = None) -> LaunchCheck:
    """The one preflight of a pipeline run, before a run exists: model input size, global batch, hosts (probed
    over ssh, unless `probed` holds their answers), the Horovod build, a run to resume. Its result travels to the
    launch."""
    check = check_launch(params, PREPARED_DIR, probed)
    if params.train.resume_from:
        workspace = resumable_run(params, params.train.resume_from)
        if not trained_already(params, PREPARED_DIR, workspace.model_dir, workspace.checkpoint_dir):
            check_resumable(params, workspace.checkpoint_dir, checkpoint_owner(params, read_manifest(PREPARED_DIR)))
    return check


def probe_step(params: Params) -> Probed:
    """The answers of the remote hosts train.hosts names, asked once (a sweep's trials run on some of them each)."""
    return probe_hosts(PREPARED_DIR, list(host_slots(params.train))) if listed(params.train) else {}


def version_step() -> dvc.DataVersion:
    """Record the prepared data in dvc.lock and push it to the DVC remote; returns its version."""
    return dvc.version_data()


def data_plan_step(params: Params, check: LaunchCheck) -> list[str]:
    """Each rank's share of the training split per epoch: records, steps, records dropped."""
    return data_plan_lines(params, read_manifest(PREPARED_DIR), check.gpus_per_host)


def preflight_lines(params: Params, check: LaunchCheck) -> list[str]:
    """What the preflight found, in words: the ports the job will open, then each rank's share of the data."""
    return [*listening_lines(params, check.controller), *data_plan_step(params, check)]


def dry_run_step(params: Params, on_line: OnLine = print) -> list[str]:
    """Prepare and check what needs no other host, then the steps, the launch plan (each process's host and
    command) and the per-rank data plan, without contacting a host, opening a run or training."""
    prepare_step(params, on_line)
    check = dry_run_check(params, PREPARED_DIR)
    config_file = RunWorkspace("<run id>").model_dir / CONFIG_FILE_NAME
    not_checked = unchecked_hosts(params)
    hosts = [f"hosts not checked (a dry run contacts no host): {', '.join(not_checked)}"] if not_checked else []
    return ["steps: " + " -> ".join(PIPELINE_STEPS), "launch:", *describe_launch(params, check.controller, config_file),
            *listening_lines(params, check.controller), *hosts, "data:", *data_plan_step(params, check)]


def open_run_step(params: Params, check: LaunchCheck, version: dvc.DataVersion | None = None,
                  state: RunState | None = None, labels: RunLabels = RunLabels()) -> str:
    """The MLflow run of this pipeline run (labelled as `labels` say): a new one, or the run named by
    train.resume_from, reopened."""
    if params.train.resume_from:
        run_id = resumable_run(params, params.train.resume_from).run_id
        mlflow_store.reopen_run(run_id)
        return run_id
    version = version or dvc.data_version()
    run_id = run_log.open_run(params, version, state or run_state(params, version), labels.source, labels.tags,
                              labels.name_prefix, check.gpus_per_host)
    mlflow_store.client().log_text(run_id, "\n".join(data_plan_step(params, check)) + "\n", "data_plan.txt")
    return run_id


def train_step(params: Params, run_id: str, check: LaunchCheck, on_line: OnLine = print,
               model_outputs: bool = True) -> Path:
    """Train into the run's workspace, resuming from its own last checkpoint when it has one (a retry, a resume);
    record the training in the run. Returns the model directory. model_outputs: the lead process also writes what
    evaluate, export and register read (a trial or a scaling run, which ends after training, needs none)."""
    workspace = RunWorkspace(run_id)
    mlflow_store.reopen_run(run_id)
    with mlflow_store.failing_marks_run(run_id), file_lock(workspace.training_lock):
        with catching_up_metrics(run_id, workspace.checkpoint_dir), system_metrics(run_id):
            result = train(params, PREPARED_DIR, workspace.model_dir, workspace.checkpoint_dir, run_id, on_line,
                           check, model_outputs)
        scaling_key = config_key(params, read_manifest(PREPARED_DIR), with_np=False)
        run_log.log_training(run_id, params, result.summary, workspace.model_dir, scaling_key)
        write_text_atomic(workspace.model_dir / RUN_FILE, json.dumps({"run_id": run_id}))
    return workspace.model_dir


def evaluate_step(run_id: str) -> dict[str, float]:
    """Test metrics, per-class precision/recall, confusion matrix and training curves into the run and its
    workspace (metrics.json, evaluation/)."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        check_trained_on(workspace.model_dir, PREPARED_DIR)
        outputs_written(workspace.model_dir, PREPARED_DIR)  # a sweep's trial trains without them
        evaluation = evaluate(workspace.model_dir, PREPARED_DIR)  # from the test predictions the training wrote
        run_log.log_evaluation(run_id, evaluation, workspace.training_history(), workspace.evaluation_dir)
        write_text_atomic(workspace.metrics_file, json.dumps(evaluation.metrics, indent=2))
    return evaluation.metrics


def export_step(run_id: str) -> str:
    """SavedModel checked (into the workspace) and logged. Returns where the artifact store holds it."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        result = export(workspace.model_dir, workspace.savedmodel_dir)
        return run_log.log_export(run_id, result.path, result.max_abs_diff)


def register_step(run_id: str, params: Params) -> GateDecision:
    """Register the SavedModel as a new model version and decide the gate: the champion is scored on this run's
    test split (in export's fresh process). The decision goes to the workspace (gate.json); the alias is given when
    the run is published."""
    workspace, registry = RunWorkspace(run_id), params.registry
    with mlflow_store.failing_marks_run(run_id):
        images, _ = parity_sample(workspace.model_dir)
        version = model_registry.log_registered_model(run_id, workspace.savedmodel_dir, images[:2],
                                                       read_spec(workspace.model_dir)["classes"], registry.model_name)
        accuracy = json.loads(workspace.metrics_file.read_text())["test_accuracy"]
        decision = model_registry.decide_gate(
            registry.model_name, version, accuracy, registry.min_delta, split_hash(read_manifest(PREPARED_DIR)),
            lambda champion: model_registry.score_registered_model(champion, PREPARED_DIR, champion_accuracy))
        write_text_atomic(workspace.gate_file, json.dumps(decision.as_dict(), indent=2))
    close_fresh_process()
    return decision


def champion_accuracy(savedmodel: Path, data_dir: Path) -> float | None:
    """The champion's SavedModel scored on the test split in export's fresh process (it has TensorFlow)."""
    return fresh_process().ask("accuracy", savedmodel=str(savedmodel), data_dir=str(data_dir))


def publish_step(params: Params, run_id: str, names: list[str] = PUBLISHED_ITEMS, record: bool = True) -> str:
    """Publish the run's outputs to the fixed paths and record them in DVC, all or nothing under a lock; give the
    new model version its alias; only then mark the run FINISHED. Returns what happened to dvc.lock."""
    workspace = RunWorkspace(run_id)
    last_step = RUN_STEPS[-1].publishes
    with mlflow_store.failing_marks_run(run_id):
        with exclusive(), published(workspace, names):
            outcome = record_outputs(params, tuple(step.name for step in RUN_STEPS)) if record \
                else "dvc.lock is written by dvc repro"
        if record:
            mlflow_store.set_tags(run_id, {"ringflow.dvc_record": outcome})
        if set(last_step) <= set(names):
            decision = GateDecision(**json.loads(workspace.gate_file.read_text()))
            model_registry.apply_gate(decision)
            run_log.log_gate(run_id, decision)
    if set(last_step) <= set(names):
        mlflow_store.end_run(run_id, ok=True)
    return outcome


def scaling_train_step(params: Params, version: dvc.DataVersion, on_line: OnLine = print) -> str:
    """One finished training run at params.train.np, in its own workspace, for a scaling report."""
    run, _ = run_steps(RunContext(params, version=version, on_line=on_line, model_outputs=False), TRAINING_RUN)
    mlflow_store.end_run(run.run_id, ok=True)
    return run.run_id


def scaling_report_step(params: Params, runs: list[tuple[int, str]]) -> tuple[list[dict[str, Any]], str]:
    """The scaling table of (np, run id) pairs, logged as a `scaling` MLflow run; (rows, that run's id)."""
    from tasks.tracking.scaling import log_report, scaling_rows
    rows = scaling_rows(runs)
    return rows, log_report(params.tracking.experiment, rows, OUTPUTS_DIR / "scaling")


def restore_step(run_id: str | None, data_hash: str | None) -> tuple[str, Path]:
    """Bring back the prepared data of a past run (by MLflow run id) or of a DVC hash; (hash, where)."""
    from tasks.params import ParamsError
    if run_id:
        data_hash = mlflow_store.client().get_run(run_id).data.params["data_hash"]
    if not data_hash:
        raise ParamsError("restore needs --run-id or --data-hash")
    with prepared_data_lock(True, f"restore of data version {data_hash}"):  # after the runs that read the data
        return data_hash, dvc.restore_data(data_hash)


def compare_step(params: Params, count: int, csv_path: Path) -> str:
    """The last `count` training runs side by side (also written as CSV)."""
    from tasks.tracking.compare import compare
    return compare(params.tracking.experiment, count, csv_path)


def copy_runs_step(source: str | None, target: str | None) -> str:
    """Every run and model version of `source` (the embedded store) into `target`, each once; what was copied."""
    from tasks.params import ParamsError
    from tasks.tracking.copy_runs import copy_runs
    from tasks.tracking.server import store_problem
    if not target:
        raise ParamsError("copy-runs needs --to, the tracking server to copy into (e.g. http://127.0.0.1:5000)")
    source = source or mlflow_store.embedded_uri()
    if problem := store_problem(target) or store_problem(source):
        raise ParamsError(problem)
    return copy_runs(source, target).sentence()
