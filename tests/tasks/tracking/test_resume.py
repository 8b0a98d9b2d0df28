"""Which run a resume continues: an unfinished run of this experiment with a checkpoint, not training now; every
other case is one line saying why not."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tasks.atomic import file_lock, lock_held
from tasks.params import Params, load_params
from tasks.tracking import mlflow_store, resume
from tasks.tracking.resume import NotResumable, interrupted_run, resumable_run
from tasks.workspace import RunWorkspace


@pytest.fixture
def params(shared_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Params:
    """A fresh experiment per test; run workspaces under tmp_path."""
    monkeypatch.setattr(resume, "RunWorkspace", functools.partial(RunWorkspace, runs_dir=tmp_path))
    name = f"resume-{tmp_path.name}"
    mlflow_store.client().create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    return load_params({"tracking.experiment": name})


def training_run(params: Params, runs_dir: Path, status: str | None = None, checkpoint: bool = True) -> str:
    """A training run (it has a data hash) that saved a checkpoint unless told otherwise; ended with `status`."""
    run_id = mlflow_store.start_run(params.tracking.experiment, {"data_hash": "abc"}, {})
    if checkpoint:
        checkpoints = RunWorkspace(run_id, runs_dir).checkpoint_dir
        checkpoints.mkdir(parents=True)
        (checkpoints / "checkpoint").write_text("model_checkpoint_path: \"ckpt-1\"\n")
    if status:
        mlflow_store.client().set_terminated(run_id, status)
    return run_id


def test_an_interrupted_run_with_a_checkpoint_is_continued(params: Params, tmp_path: Path) -> None:
    run_id = training_run(params, tmp_path, "FAILED")
    assert resumable_run(params, run_id) == RunWorkspace(run_id, tmp_path)
    assert interrupted_run(params) == run_id


def test_the_newest_interrupted_run_with_a_checkpoint_is_the_one_resume_takes(params: Params, tmp_path: Path) -> None:
    older = training_run(params, tmp_path, "FAILED")
    training_run(params, tmp_path, "FAILED", checkpoint=False)  # newer, but nothing to continue from
    training_run(params, tmp_path, "FINISHED")
    assert interrupted_run(params) == older


@pytest.mark.parametrize(("status", "checkpoint", "why"), [
    ("FINISHED", True, "has finished; start a new run instead"),
    ("FAILED", False, "saved no checkpoint in "),
])
def test_a_run_that_cannot_be_continued_is_one_line(params: Params, tmp_path: Path, status: str, checkpoint: bool,
                                                    why: str) -> None:
    run_id = training_run(params, tmp_path, status, checkpoint)
    with pytest.raises(NotResumable, match=f"^train.resume_from: run {run_id} {why}"):
        resumable_run(params, run_id)


def test_an_unknown_run_or_one_of_another_experiment_is_refused(params: Params, tmp_path: Path) -> None:
    with pytest.raises(NotResumable, match="^train.resume_from: no MLflow run 0123abcd$"):
        resumable_run(params, "0123abcd")
    other = load_params({"tracking.experiment": "Default"})
    run_id = training_run(params, tmp_path, "FAILED")
    with pytest.raises(NotResumable, match=f"^train.resume_from: run {run_id} is not in experiment Default$"):
        resumable_run(other, run_id)


def test_a_run_training_right_now_is_not_resumed_twice(params: Params, tmp_path: Path) -> None:
    run_id = training_run(params, tmp_path, "FAILED")
    workspace = RunWorkspace(run_id, tmp_path)
    with file_lock(workspace.training_lock):  # as the train step holds it
        assert lock_held(workspace.training_lock)
        with pytest.raises(NotResumable, match="is training right now$"):
            resumable_run(params, run_id)
        with pytest.raises(NotResumable, match="^--resume: no interrupted run with a checkpoint"):
            interrupted_run(params)
