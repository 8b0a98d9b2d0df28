"""Which run a resume continues: an unfinished run of the experiment that saved a checkpoint and is not training
right now (`--resume` takes the newest such run; train.resume_from names one)."""
from __future__ import annotations

from tasks.atomic import lock_held
from tasks.params import Params
from tasks.tracking import mlflow_store, run_log
from tasks.workspace import RunWorkspace


class NotResumable(ValueError):
    """The run named to resume cannot be continued; one line saying why."""
    bad_input = True


def resumable_run(params: Params, run_id: str) -> RunWorkspace:
    """The workspace of an unfinished run of this experiment to continue; NotResumable when there is none."""
    from mlflow.exceptions import MlflowException
    try:
        run = mlflow_store.client().get_run(run_id)
    except MlflowException:
        raise NotResumable(f"train.resume_from: no MLflow run {run_id}") from None
    if run.info.experiment_id != mlflow_store.experiment_id(params.tracking.experiment):
        raise NotResumable(f"train.resume_from: run {run_id} is not in experiment {params.tracking.experiment}")
    if run.info.status == "FINISHED":
        raise NotResumable(f"train.resume_from: run {run_id} has finished; start a new run instead")
    workspace = RunWorkspace(run_id)
    if lock_held(workspace.training_lock):
        raise NotResumable(f"train.resume_from: run {run_id} is training right now")
    if not (workspace.checkpoint_dir / "checkpoint").is_file():
        raise NotResumable(f"train.resume_from: run {run_id} saved no checkpoint in {workspace.checkpoint_dir}")
    return workspace


def interrupted_run(params: Params) -> str:
    """The newest unfinished training run that saved a checkpoint (what `--resume` continues)."""
    for run in run_log.interrupted_runs(params.tracking.experiment):
        workspace = RunWorkspace(run.info.run_id)
        if (workspace.checkpoint_dir / "checkpoint").is_file() and not lock_held(workspace.training_lock):
            return run.info.run_id
    raise NotResumable(f"--resume: no interrupted run with a checkpoint in experiment {params.tracking.experiment}")
