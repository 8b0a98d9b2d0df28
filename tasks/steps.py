"""The pipeline's steps: the one door the Prefect flows, the CLI (`python -m tasks`) and the dvc.yaml stages go
through. Each step is a plain, typed function; the flows wrap them in Prefect tasks. The policy lives in the stage
folders (tasks/data, tasks/launch, tasks/tracking, tasks/versioning, tasks/outputs); a step only chains them.

The order of the steps is written once, here: STEPS, each a RunStep declaring what it reads of the run (its call),
what it gives the steps after it (its give: a field of RunContext, which the type checker checks) and what it
publishes (prepare runs before them, once for one run or many: PIPELINE_STEPS). run_steps is the one driver for
every entry point, which chooses the steps it runs (the flow: CHECKS, then OPENED unless the changes step found the
run unchanged; a sweep's trial and a scaling run: TRAINING_RUN; a sweep's best trial: AFTER_TRAINING; a dvc.yaml
stage: stage_steps) and how each runs (the flows: a Prefect task per step). A pipeline run is one MLflow run:
open-run creates it (or reopens the run to resume); the steps inside it (RUN_STEPS) write only into its workspace
(outputs/runs/<run id>/); publish copies the results to the fixed paths, records them in DVC and only then marks the
run FINISHED.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection, Generic, NamedTuple, TypeVar

from tasks.atomic import file_lock, write_text_atomic
from tasks.data.data_lock import DataHolder, prepared_data_lock
from tasks.data.prepare import fingerprint, left_out_line, prepare, up_to_date
from tasks.data.validate import save_report, validated
from tasks.launch.hostlist import host_slots, listed
from tasks.launch.job import train
from tasks.launch.job_config import check_resumable, checkpoint_owner, config_key, trained_already
from tasks.launch.output.communication import communication_advice
from tasks.launch.plan import data_plan_lines, describe_launch, listening_lines
from tasks.launch.preflight import (
    LaunchCheck,
    PreflightError,
    Probed,
    check_launch,
    dry_run_check,
    probe_hosts,
    unchecked_hosts,
)
from tasks.launch.tuning import last_gradient_bytes, tuning_line
from tasks.outputs.evaluate import check_trained_on, evaluate, outputs_written, split_hash
from tasks.outputs.export import close_fresh_process, export, fresh_process, parity_sample
from tasks.outputs.publish import exclusive, published
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR, PREPARED_DIR, VALIDATED_STAMP
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
from trainer.model_outputs import keras_loss_name, loss_name, model_task
from trainer.prepared_data import data_task, read_manifest
from trainer.reference import REFERENCE

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
class RunHow:
    """How an entry point runs the steps: the new run's labels; the hosts' answers a sweep asked once (`probed`);
    the data lock's holder (named after the run once it exists); where the training's lines go; whether the
    training writes what evaluate, export and register read (a sweep's trial or a scaling run, which end after
    training, need none); the dvc.yaml stage it is (which publishes only its own step's items; `dvc repro` records
    dvc.lock); whether an unchanged run is skipped (the flow's skip_unchanged)."""
    labels: RunLabels = RunLabels()
    probed: Probed | None = None
    holder: DataHolder | None = None
    on_line: OnLine = print
    model_outputs: bool = True
    stage: str = ""
    skip_unchanged: bool = False


@dataclass(frozen=True)
class RunContext:
    """One pipeline run as its steps hand it on: the params, how this entry point runs it, and what the steps gave
    so far, each field given by the step named beside it (or by the entry point in its stead)."""
    params: Params
    how: RunHow = RunHow()
    check: LaunchCheck | None = None  # preflight
    version: dvc.DataVersion | None = None  # version (a sweep's trials: the sweep's)
    state: RunState | None = None  # changes (a sweep's trial: the sweep)
    changed: tuple[str, ...] = ()  # changes: which of data, code and params differ from the last finished run
    unchanged_since: str | None = None  # changes, when asked to skip: the finished run of the same state
    run_id: str = ""  # open-run (a dvc stage after train: the run whose model is published)
    model_dir: Path | None = None  # train
    metrics: dict[str, float] | None = None  # evaluate
    savedmodel: str | None = None  # export
    decision: GateDecision | None = None  # register
    dvc_record: str | None = None  # publish

    def launch_check(self) -> LaunchCheck:
        if self.check is None:
            raise ValueError(f"run {self.run_id or '(not open)'}: this step needs the preflight's result")
        return self.check

    def data_version(self) -> dvc.DataVersion:
        if self.version is None:
            raise ValueError(f"run {self.run_id or '(not open)'}: this step needs the data's version")
        return self.version

    def gate(self) -> GateDecision:
        if self.decision is None:
            raise ValueError(f"run {self.run_id or '(not open)'}: this step needs the registry's gate decision")
        return self.decision


Given = TypeVar("Given")


@dataclass(frozen=True)
class RunStep(Generic[Given]):
    """A step of a pipeline run: what it does with the run (`call`, reading the run's fields it needs), how its
    result fills the run for the steps after it (`give`), the workspace items it publishes (a dvc.yaml stage of
    the same name), whether a failure of it may pass when it runs again (from the run's last checkpoint), and how
    the run it gave reads."""
    name: str
    call: Callable[[RunContext], Given]
    give: Callable[[RunContext, Given], RunContext]
    shown: Callable[[RunContext], str]
    publishes: tuple[str, ...] = ()
    retried: bool = False


def open_step(run: RunContext) -> str:
    """open-run as a step: the run's id; the data lock's holder is named after it."""
    run_id = open_run_step(run.params, run.launch_check(), run.version, run.state, run.how.labels)
    if run.how.holder:
        run.how.holder.rename(f"MLflow run {run_id}")
    return run_id


def publish_items(run: RunContext) -> str:
    """publish as a step: everything the run made, or a dvc stage's own items (dvc repro records dvc.lock); the
    gate is applied and the run finished once the run's last step (register) is published."""
    stage = run.how.stage
    names = list(step_named(stage).publishes) if stage else PUBLISHED_ITEMS
    return publish_step(run.params, run.run_id, names, record=not stage, finish=stage in ("", REGISTER.name))


PREFLIGHT = RunStep("preflight", lambda run: preflight_step(run.params, run.how.probed),
                    lambda run, check: replace(run, check=check),
                    lambda run: "\n".join(preflight_lines(run.params, run.launch_check())))
VERSION = RunStep("version", lambda run: version_step(), lambda run, version: replace(run, version=version),
                  lambda run: f"data {run.data_version().data_hash} at git {run.data_version().git_commit} (in the "
                              "DVC remote)")
CHANGES = RunStep("changes", lambda run: changes_step(run.params, run.data_version(), run.how.skip_unchanged),
                  lambda run, found: replace(run, state=found.state, changed=found.changed,
                                             unchanged_since=found.unchanged_since),
                  lambda run: changes_shown(run.changed, run.unchanged_since))
OPEN_RUN = RunStep("open-run", open_step, lambda run, run_id: replace(run, run_id=run_id),
                   lambda run: f"MLflow run {run.run_id}")
TRAIN = RunStep("train", lambda run: train_step(run.params, run.run_id, run.launch_check(), run.how.on_line,
                                                run.how.model_outputs),
                lambda run, model_dir: replace(run, model_dir=model_dir), lambda run: f"model: {run.model_dir}",
                publishes=("model",), retried=True)
EVALUATE = RunStep("evaluate", lambda run: evaluate_step(run.run_id),
                   lambda run, metrics: replace(run, metrics=metrics), lambda run: str(run.metrics),
                   publishes=("metrics.json", "evaluation"))
EXPORT = RunStep("export", lambda run: export_step(run.run_id), lambda run, path: replace(run, savedmodel=path),
                 lambda run: f"savedmodel: {run.savedmodel}", publishes=("savedmodel",))
REGISTER = RunStep("register", lambda run: register_step(run.run_id, run.params),
                   lambda run, decision: replace(run, decision=decision), lambda run: run.gate().sentence(),
                   publishes=("gate.json",))
PUBLISH = RunStep("publish", publish_items, lambda run, outcome: replace(run, dvc_record=outcome),
                  lambda run: f"published run {run.run_id}; {run.dvc_record}")

STEPS: tuple[RunStep[Any], ...] = (PREFLIGHT, VERSION, CHANGES, OPEN_RUN, TRAIN, EVALUATE, EXPORT, REGISTER, PUBLISH)
STEP_NAMES = tuple(step.name for step in STEPS)
PIPELINE_STEPS = ("prepare", *STEP_NAMES)  # prepare runs once before one run or many (a sweep's, a scaling's)
RUN_STEPS = tuple(step for step in STEPS if step.publishes)  # inside one MLflow run: the dvc.yaml stages
PUBLISHED_ITEMS = [item for step in RUN_STEPS for item in step.publishes]
CHECKS = (PREFLIGHT, VERSION, CHANGES)  # the flow's: after them, an unchanged run may be skipped
OPENED = (OPEN_RUN, TRAIN, EVALUATE, EXPORT, REGISTER, PUBLISH)  # from the run's opening to its publishing
TRAINING_RUN = (PREFLIGHT, OPEN_RUN, TRAIN)  # a run that ends with its training: a sweep's trial, a scaling run
AFTER_TRAINING = (EVALUATE, EXPORT, REGISTER, PUBLISH)  # a sweep's best trial, trained already
StepRunner = Callable[[RunStep[Any], RunContext], Any]  # how an entry point runs one step: directly, as a task


def step_named(name: str) -> RunStep[Any]:
    return next(step for step in STEPS if step.name == name)


def stage_steps(name: str) -> tuple[RunStep[Any], ...]:
    """The steps of a dvc.yaml stage: its own and its publishing; the training first opens its run."""
    return (*TRAINING_RUN, PUBLISH) if name == TRAIN.name else (step_named(name), PUBLISH)


def run_directly(step: RunStep[Any], run: RunContext) -> Any:
    return step.call(run)


def run_steps(run: RunContext, chosen: Collection[RunStep[Any]] = STEPS,
              runner: StepRunner = run_directly) -> RunContext:
    """The one driver of a pipeline run's steps, for every entry point (the flows, the command line and the
    dvc.yaml stages, a sweep's trials and its best trial, the scaling runs): the `chosen` steps in the steps' one
    order, each through `runner`, each given what the ones before gave; the run as they left it."""
    if foreign := [step.name for step in chosen if step not in STEPS]:
        raise ValueError(f"not a step of a pipeline run: {', '.join(sorted(foreign))}")
    for step in STEPS:
        if step in chosen:
            run = step.give(run, runner(step, run))
    return run


def convert_step(params: Params, on_line: OnLine = print) -> bool:
    """Convert the dataset to TFRecords unless they are up to date; returns whether it was skipped."""
    result = prepare(params.data, PREPARED_DIR)
    on_line(f"prepare skipped: {PREPARED_DIR} is up to date with {params.data.dataset} and the data params"
            if result.skipped else f"prepared {params.data.dataset} into {PREPARED_DIR}")
    if line := left_out_line(result.manifest, PREPARED_DIR):
        on_line(line)
    return result.skipped


def prepare_step(params: Params, on_line: OnLine = print, convert: Callable[[Params], bool] | None = None,
                 check: Callable[[Path], Report] | None = None) -> Report:
    """Convert (unless up to date) and validate the data; the report is saved beside it and returned.

    Data already up to date is taken under the shared lock (runs that read it go on); converting takes the lock
    exclusively, after the runs that use the data (prepared_data_lock says which). A caller may wrap the two halves
    (the flow runs them as Prefect tasks).
    """
    exclusive = False  # first as a reader: after another prepare's conversion, the data may be current
    while True:
        with prepared_data_lock(exclusive, "prepare", on_line):
            if exclusive or data_current(params):
                skipped = convert(params) if convert else convert_step(params, on_line)
                report = (check or validate_prepared)(PREPARED_DIR)
                save_report(report, PREPARED_DIR)
                return report | {"skipped": skipped}
        exclusive = True  # not current: convert, alone


def validate_prepared(data_dir: Path) -> Report:
    """The prepared data's validation, read again only when its files changed (validated's stamp)."""
    return validated(data_dir, VALIDATED_STAMP)


def data_current(params: Params) -> bool:
    """Whether the prepared data is up to date with the data params (nothing to convert)."""
    return up_to_date(PREPARED_DIR, fingerprint(params.data)) is not None


def preflight_step(params: Params, probed: Probed | None = None) -> LaunchCheck:
    """The one preflight of a pipeline run, before a run exists: model input size, global batch, hosts (probed
    over ssh, unless `probed` holds their answers), the Horovod build, a run to resume; the model's gradient size
    as the last run of its config logged it (the job's tuning). Its result travels to the launch."""
    check = replace(check_launch(params, PREPARED_DIR, probed),
                    gradient_bytes=last_gradient_bytes(params, PREPARED_DIR))
    manifest = check_gate_metric(params)
    if params.train.resume_from:
        workspace = resumable_run(params, params.train.resume_from)
        if not trained_already(params, PREPARED_DIR, workspace.model_dir, workspace.checkpoint_dir):
            check_resumable(params, workspace.checkpoint_dir, checkpoint_owner(params, manifest))
    return check


class Changes(NamedTuple):
    """What the changes step found: the run's state, what differs from the last finished run, and (when asked to
    skip an unchanged run) the finished run of the same state."""
    state: RunState
    changed: tuple[str, ...]
    unchanged_since: str | None


def changes_step(params: Params, version: dvc.DataVersion, skip_unchanged: bool) -> Changes:
    """The state (data, code, params) a run of these params would train from, what changed since the last
    finished run, and, with skip_unchanged, the last successful run of the same state (nothing to train)."""
    state = run_state(params, version)
    changed = tuple(state.changes_from(run_log.last_finished_state(params.tracking.experiment)))
    previous = run_log.last_successful_run(params.tracking.experiment, state) if skip_unchanged else None
    return Changes(state, changed, previous)


def changes_shown(changed: tuple[str, ...], unchanged_since: str | None) -> str:
    if unchanged_since:
        return f"data, code and params unchanged since run {unchanged_since}"
    return f"changed since the last finished run: {', '.join(changed)}" if changed else "nothing changed"


def check_gate_metric(params: Params) -> dict[str, Any]:
    """registry.metric is a test metric this run will have (before anything trains); the prepared manifest."""
    manifest = read_manifest(PREPARED_DIR)
    task = data_task(manifest, params.train.task)
    if problem := model_registry.gate_metric_problem(params.registry.metric, task, manifest, params.train.metrics):
        raise PreflightError(problem)
    return manifest


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
    """What the preflight found, in words: the task, the ports the job will open, then each rank's share of the
    data."""
    manifest = read_manifest(PREPARED_DIR)
    stated = "stated in train.task" if params.train.task != "auto" else "from the data"
    task = f"task: {data_task(manifest, params.train.task)} ({stated}), model {params.train.model}"
    tuned = tuning_line(params, dict(check.host_cores), check.gpus_per_host, check.gradient_bytes)
    return [task, *listening_lines(params, check.controller), *([tuned] if tuned else []),
            *data_plan_step(params, check)]


def dry_run_step(params: Params, on_line: OnLine = print) -> list[str]:
    """Prepare and check what needs no other host, then the steps, the launch plan (each process's host and
    command) and the per-rank data plan, without contacting a host, opening a run or training."""
    prepare_step(params, on_line)
    check = dry_run_check(params, PREPARED_DIR)
    check_gate_metric(params)
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
    if advice := communication_advice(result.summary, params.train.batch_size):
        on_line(advice)
    return workspace.model_dir


def evaluate_step(run_id: str) -> dict[str, float]:
    """Test metrics, per-class precision/recall, confusion matrix, training curves and the drift monitor's
    reference into the run and its workspace (metrics.json, evaluation/)."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        check_trained_on(workspace.model_dir, PREPARED_DIR)
        outputs_written(workspace.model_dir, PREPARED_DIR)  # a sweep's trial trains without them
        evaluation = evaluate(workspace.model_dir, PREPARED_DIR)  # from the test predictions the training wrote
        run_log.log_evaluation(run_id, evaluation, workspace.training_history(), workspace.evaluation_dir,
                               workspace.model_dir / REFERENCE)
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
        manifest = read_manifest(PREPARED_DIR)
        kind = model_registry.model_kind(manifest, model_task(workspace.model_dir, manifest))
        metric, mode = model_registry.gate_metric(registry.metric, registry.mode, kind.task)
        value = model_registry.gate_value(json.loads(workspace.metrics_file.read_text()), metric)
        loss, test_split = loss_name(workspace.model_dir, kind.task), split_hash(manifest)
        score_name = gate_score_name(metric, loss)
        version = model_registry.log_registered_model(run_id, workspace.savedmodel_dir, images[:2],
                                                       read_spec(workspace.model_dir)["classes"], registry.model_name,
                                                       kind, (test_split, score_name, value) if score_name else None)
        scorer = champion_scorer(metric, kind.task, loss)
        decision = model_registry.decide_gate(
            registry.model_name, version, value, registry.min_delta, test_split,
            lambda champion: champion_score(champion, test_split, score_name, scorer), metric, mode)
        write_text_atomic(workspace.gate_file, json.dumps(decision.as_dict(), indent=2))
    close_fresh_process(wait=False)
    return decision


def gate_score_name(metric: str, loss: str | None) -> str | None:
    """The name a version's score on a test split is recorded under: the gate's metric (test_loss with the Keras
    loss that computes it; none for a user's own loss)."""
    if metric != "test_loss":
        return metric
    return f"test_loss.{loss}" if loss else None


def champion_score(champion: Any, test_split: str, score_name: str | None,
                   scorer: Callable[[Path, Path], float | None], data_dir: Path = PREPARED_DIR) -> float | None:
    """The champion's score on this test split: as the registry records it (signed), else scored by the fresh
    process and then recorded, so that the next run on this split reads it."""
    if score_name and (recorded := model_registry.recorded_score(champion, test_split, score_name)) is not None:
        return recorded
    value = model_registry.score_registered_model(champion, data_dir, scorer)
    if score_name and value is not None:
        model_registry.record_score(champion, test_split, score_name, value)
    return value


def champion_needs_scoring(params: Params) -> bool:
    """Whether this run's gate will score the champion (it holds no recorded score on the prepared test split): a
    fresh TensorFlow process is then worth starting while the run trains."""
    manifest = read_manifest(PREPARED_DIR)
    task = data_task(manifest, params.train.task)
    metric, _ = model_registry.gate_metric(params.registry.metric, params.registry.mode, task)
    champion = model_registry.current_champion(params.registry.model_name)
    score_name = gate_score_name(metric, keras_loss_name(params.train.loss, task))
    return champion is not None and (
        score_name is None or model_registry.recorded_score(champion, split_hash(manifest), score_name) is None)


def champion_accuracy(savedmodel: Path, data_dir: Path) -> float | None:
    """The champion's SavedModel scored on the test split in export's fresh process (it has TensorFlow)."""
    return fresh_process().ask("accuracy", savedmodel=str(savedmodel), data_dir=str(data_dir))


def champion_scorer(metric: str, task: str, loss: str | None) -> Callable[[Path, Path], float | None]:
    """The champion's SavedModel's value of the gate's test metric on the test split, in export's fresh process."""
    return lambda savedmodel, data_dir: fresh_process().ask("score", savedmodel=str(savedmodel),
                                                            data_dir=str(data_dir), metric=metric, task=task, loss=loss)


def publish_step(params: Params, run_id: str, names: list[str] = PUBLISHED_ITEMS, record: bool = True,
                 finish: bool = True) -> str:
    """Publish the run's outputs to the fixed paths and record them in DVC, all or nothing under a lock; when
    `finish` (the register step's outputs are among them), give the new model version its alias and only then mark
    the run FINISHED. Returns what happened to dvc.lock."""
    workspace = RunWorkspace(run_id)
    with mlflow_store.failing_marks_run(run_id):
        with exclusive(), published(workspace, names):
            outcome = record_outputs(params, tuple(step.name for step in RUN_STEPS)) if record \
                else "dvc.lock is written by dvc repro"
        if record:
            mlflow_store.set_tags(run_id, {"ringflow.dvc_record": outcome})
        if finish:
            decision = GateDecision.from_dict(json.loads(workspace.gate_file.read_text()))
            model_registry.apply_gate(decision)
            run_log.log_gate(run_id, decision)
    if finish:
        mlflow_store.end_run(run_id, ok=True)
    return outcome


def scaling_train_step(params: Params, version: dvc.DataVersion, on_line: OnLine = print) -> str:
    """One finished training run at params.train.np, in its own workspace, for a scaling report."""
    how = RunHow(on_line=on_line, model_outputs=False)
    run = run_steps(RunContext(params, how, version=version), TRAINING_RUN)
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
