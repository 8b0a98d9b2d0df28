"""Where things live: the code is this checkout; the workspace is the checkout unless RINGFLOW_WORKSPACE names
another directory, and relative parameter paths are taken from the workspace."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import tasks.paths as paths
from tasks.paths import ROOT, WORKSPACE_ENV, Workspace, resolve_path, workspace_from_environment


def fresh_paths_module(monkeypatch: pytest.MonkeyPatch, workspace: str | None) -> ModuleType:
    """A new copy of tasks/paths.py executed with RINGFLOW_WORKSPACE as given (the imported one stays as it is)."""
    if workspace is None:
        monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    else:
        monkeypatch.setenv(WORKSPACE_ENV, workspace)
    spec = importlib.util.spec_from_file_location("fresh_tasks_paths", paths.__file__)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_code_root_is_this_checkout() -> None:
    assert (ROOT / "tasks" / "paths.py").is_file() and (ROOT / "trainer").is_dir() and ROOT.is_absolute()


def test_without_the_variable_the_workspace_is_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    assert workspace_from_environment() == Workspace(ROOT)


def test_the_variable_names_the_workspace_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(WORKSPACE_ENV, "ws")
    assert workspace_from_environment().root == tmp_path.resolve() / "ws"


def test_a_workspace_under_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(WORKSPACE_ENV, "~/ws")
    assert workspace_from_environment().root == tmp_path.resolve() / "ws"


def test_a_workspace_holds_the_pipeline_s_files_in_their_places(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    assert (workspace.params_file, workspace.prepared_dir, workspace.outputs_dir, workspace.mlruns_dir,
            workspace.locks_dir) == (tmp_path / "params.yaml", tmp_path / "data" / "prepared", tmp_path / "outputs",
                                     tmp_path / "mlruns", tmp_path / "outputs" / ".locks")


def test_every_fixed_path_follows_the_named_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = fresh_paths_module(monkeypatch, str(tmp_path))
    root = tmp_path.resolve()
    assert module.ROOT == ROOT  # the code does not move with the workspace
    assert {name: getattr(module, name) for name in ("PARAMS_FILE", "PREPARED_DIR", "OUTPUTS_DIR", "MODEL_DIR",
                                                     "SAVEDMODEL_DIR", "METRICS_FILE", "MLRUNS_DIR", "GATE_FILE",
                                                     "EVALUATION_DIR", "LOCKS_DIR")} == {
        "PARAMS_FILE": root / "params.yaml", "PREPARED_DIR": root / "data" / "prepared",
        "OUTPUTS_DIR": root / "outputs", "MODEL_DIR": root / "outputs" / "model",
        "SAVEDMODEL_DIR": root / "outputs" / "savedmodel", "METRICS_FILE": root / "outputs" / "metrics.json",
        "MLRUNS_DIR": root / "mlruns", "GATE_FILE": root / "outputs" / "gate.json",
        "EVALUATION_DIR": root / "outputs" / "evaluation", "LOCKS_DIR": root / "outputs" / ".locks"}


def test_without_the_variable_the_fixed_paths_are_the_checkout_s(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fresh_paths_module(monkeypatch, None)
    assert module.WORKSPACE.root == ROOT and module.PARAMS_FILE == ROOT / "params.yaml"


def test_a_relative_parameter_path_is_taken_from_the_workspace(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "WORKSPACE", Workspace(tmp_path))
    monkeypatch.chdir("/")
    assert resolve_path("data/tfds") == tmp_path / "data" / "tfds"


def test_an_absolute_or_home_parameter_path_stays_where_it_points(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "WORKSPACE", Workspace(tmp_path / "ws"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_path("/srv/images") == Path("/srv/images")
    assert resolve_path("~/images") == tmp_path / "home" / "images"
