"""A run's own workspace: every output of one MLflow run under outputs/runs/<run id>/."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tasks.paths import OUTPUTS_DIR
from tasks.workspace import RUNS_DIR, RunWorkspace
from trainer.model_io import write_train_summary


def test_runs_live_under_the_workspace_outputs_by_default() -> None:
    assert RUNS_DIR == OUTPUTS_DIR / "runs"
    assert RunWorkspace("abc").root == OUTPUTS_DIR / "runs" / "abc"


def test_every_output_of_a_run_is_inside_its_own_directory(tmp_path: Path) -> None:
    workspace = RunWorkspace("r1", tmp_path)
    assert workspace.root == tmp_path / "r1"
    assert {name: getattr(workspace, name).relative_to(workspace.root).as_posix() for name in
            ("model_dir", "checkpoint_dir", "evaluation_dir", "savedmodel_dir", "metrics_file", "gate_file",
             "training_lock")} == {
        "model_dir": "model", "checkpoint_dir": "checkpoints", "evaluation_dir": "evaluation",
        "savedmodel_dir": "savedmodel", "metrics_file": "metrics.json", "gate_file": "gate.json",
        "training_lock": ".training.lock"}


def test_two_runs_share_no_path(tmp_path: Path) -> None:
    first, second = RunWorkspace("a", tmp_path), RunWorkspace("b", tmp_path)
    assert first.model_dir != second.model_dir and first.checkpoint_dir != second.checkpoint_dir


def test_each_path_documents_its_place() -> None:
    assert RunWorkspace.model_dir.__doc__ == "<workspace>/model"


def test_a_run_workspace_cannot_be_pointed_elsewhere_once_made(tmp_path: Path) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunWorkspace("a", tmp_path).run_id = "b"  # type: ignore[misc]


def test_the_training_history_comes_from_the_trained_model_s_summary(tmp_path: Path) -> None:
    workspace = RunWorkspace("r1", tmp_path)
    workspace.model_dir.mkdir(parents=True)
    history = {"loss": [0.9, 0.5], "accuracy": [0.6, 0.8]}
    write_train_summary({"history": history, "global_batch": 64}, workspace.model_dir)
    assert workspace.training_history() == history


def test_a_run_that_has_not_trained_has_no_history(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no training summary: .*r1/model/train_summary.json is missing"):
        RunWorkspace("r1", tmp_path).training_history()
