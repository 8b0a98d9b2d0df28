"""Publishing a run: all of its items or none, the previous ones back when recording fails, which run is said."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.outputs.publish import published, published_run
from tasks.workspace import RunWorkspace


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
