"""Publishing a run: all of its items or none, the previous ones back when recording fails, which run is said."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tasks.outputs.publish import published, published_run
from tasks.versioning.dvc import commit_stages
from tasks.workspace import RunWorkspace
from tests.helpers import BIN, quiet_env


def workspace_with(tmp_path: Path, run_id: str, text: str) -> RunWorkspace:
    workspace = RunWorkspace(run_id, tmp_path / "runs")
    (workspace.root / "model").mkdir(parents=True)
    (workspace.root / "model" / "weights").write_text(text)
    (workspace.root / "metrics.json").write_text(json.dumps({"test_accuracy": len(text)}))
    return workspace


def targets(tmp_path: Path) -> dict[str, Path]:
    return {"model": tmp_path / "outputs" / "model", "metrics.json": tmp_path / "outputs" / "metrics.json"}


def test_a_publish_that_fails_midway_leaves_the_last_good_outputs(tmp_path: Path) -> None:
    record = tmp_path / "outputs" / "published.json"
    with published(workspace_with(tmp_path, "good", "good"), ["model", "metrics.json"], targets(tmp_path), record):
        pass
    with pytest.raises(RuntimeError, match="dvc commit failed"):
        with published(workspace_with(tmp_path, "bad", "bad!"), ["model", "metrics.json"], targets(tmp_path),
                       record):
            assert (tmp_path / "outputs" / "model" / "weights").read_text() == "bad!"  # swapped in for the block
            raise RuntimeError("dvc commit failed")
    assert (tmp_path / "outputs" / "model" / "weights").read_text() == "good"
    assert json.loads((tmp_path / "outputs" / "metrics.json").read_text()) == {"test_accuracy": 4}
    assert published_run("model", record) == "good" and published_run("metrics.json", record) == "good"
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["metrics.json", "model", "published.json"]


def test_each_item_says_which_run_it_came_from(tmp_path: Path) -> None:
    record = tmp_path / "outputs" / "published.json"
    with published(workspace_with(tmp_path, "first", "1"), ["model", "metrics.json"], targets(tmp_path), record):
        pass
    with published(workspace_with(tmp_path, "second", "22"), ["model"], targets(tmp_path), record):
        pass
    assert (published_run("model", record), published_run("metrics.json", record)) == ("second", "first")


def test_a_first_publish_that_fails_leaves_no_record_naming_its_run(tmp_path: Path) -> None:
    record = tmp_path / "outputs" / "published.json"
    with pytest.raises(RuntimeError, match="dvc push failed"):
        with published(workspace_with(tmp_path, "first", "1"), ["model", "metrics.json"], targets(tmp_path), record):
            raise RuntimeError("dvc push failed")
    assert not record.exists() and sorted(p.name for p in (tmp_path / "outputs").iterdir()) == []


def test_leftovers_of_a_killed_publish_do_not_block_the_next(tmp_path: Path) -> None:
    """A publish killed midway leaves its hidden siblings; the next publish (even by a process of the same PID)
    goes through."""
    record = tmp_path / "outputs" / "published.json"
    with published(workspace_with(tmp_path, "first", "1"), ["model", "metrics.json"], targets(tmp_path), record):
        pass
    for stale in (f".model.new-{os.getpid()}", f".model.previous-{os.getpid()}", f".metrics.json.new-{os.getpid()}"):
        (tmp_path / "outputs" / stale).mkdir()
        (tmp_path / "outputs" / stale / "left").write_text("by a killed run")
    with published(workspace_with(tmp_path, "second", "22"), ["model", "metrics.json"], targets(tmp_path), record):
        pass
    assert (tmp_path / "outputs" / "model" / "weights").read_text() == "22"
    assert published_run("model", record) == "second"


def dvc_project(root: Path) -> Path:
    """A DVC project whose `train` stage outputs outputs/model, recorded once, with a remote no push can reach."""
    (root / "outputs" / "model").mkdir(parents=True)
    (root / "outputs" / "model" / "weights").write_text("published before")
    (root / "dvc.yaml").write_text("stages:\n  train:\n    cmd: 'true'\n    outs: [outputs/model]\n")
    (root / "not-a-directory").write_text("")
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"],
                    [str(BIN / "dvc"), "remote", "add", "-d", "broken", str(root / "not-a-directory" / "remote")],
                    [str(BIN / "dvc"), "commit", "--force", "-q", "train"]):
        subprocess.run(command, cwd=root, check=True, capture_output=True, env=quiet_env())
    return root


def test_a_failed_dvc_push_puts_dvc_lock_back_with_the_outputs(tmp_path: Path) -> None:
    """Real DVC: `dvc commit --force` records the new model in dvc.lock, then `dvc push` fails: dvc.lock, the
    model and published.json come back as they were, and DVC sees the old outputs as recorded."""
    project = dvc_project(tmp_path / "project")
    lock, record = project / "dvc.lock", project / "outputs" / "published.json"
    lock_before = lock.read_bytes()
    run = RunWorkspace("new", tmp_path / "runs")
    (run.root / "model").mkdir(parents=True)
    (run.root / "model" / "weights").write_text("the new model")
    with pytest.raises(RuntimeError, match="^dvc push train failed"):
        with published(run, ["model"], {"model": project / "outputs" / "model"}, record, (lock,)):
            commit_stages("train", root=project)
    assert lock.read_bytes() == lock_before
    assert (project / "outputs" / "model" / "weights").read_text() == "published before" and not record.exists()
    status = subprocess.run([str(BIN / "dvc"), "status", "train"], cwd=project, capture_output=True, text=True,
                            env=quiet_env())
    assert "up to date" in status.stdout, status.stdout + status.stderr
