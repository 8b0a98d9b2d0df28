"""Where things live, in one place: the code (this checkout: flows/, tasks/, trainer/, .venv) and the workspace, the
DVC project a pipeline runs in (params.yaml, dvc.yaml, dvc.lock, data/, outputs/, mlruns/).

The workspace is this checkout unless the environment variable RINGFLOW_WORKSPACE names another directory: a project
of the user's own (the `ringflow` command names the one it is run in, tasks/project.py), or a workspace of the
checkout's shape (its dvc.yaml refers to the code by relative paths, so it holds links to the checkout's code
folders). Every process of a pipeline reads it from the environment it inherits; tests point it at a temporary
directory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tasks.project import WORKSPACE_ENV

ROOT = Path(__file__).resolve().parents[1]  # the code


@dataclass(frozen=True)
class Workspace:
    """The directories and files of one ringflow workspace."""
    root: Path

    @property
    def params_file(self) -> Path:
        return self.root / "params.yaml"

    @property
    def dvc_lock_file(self) -> Path:
        """What DVC recorded of the stages' outputs (a run record: written by publish and `dvc repro`)."""
        return self.root / "dvc.lock"

    @property
    def prepared_dir(self) -> Path:
        return self.root / "data" / "prepared"

    @property
    def outputs_dir(self) -> Path:
        return self.root / "outputs"

    @property
    def mlruns_dir(self) -> Path:
        return self.root / "mlruns"

    @property
    def validated_stamp(self) -> Path:
        """The prepared data's last validation and the signature of the files it read (tasks/data/validate.py)."""
        return self.outputs_dir / "validated.json"

    @property
    def models_built(self) -> Path:
        """The user's models that built for a data shape, by their code's digests (tasks/launch/preflight.py)."""
        return self.outputs_dir / "models_built.json"

    @property
    def versioned_stamp(self) -> Path:
        """What the version step last recorded in dvc.lock and pushed (tasks/versioning/dvc.py: version_data)."""
        return self.outputs_dir / "versioned.json"

    @property
    def ranks_ahead_dir(self) -> Path:
        """The job files of ranks started before their run's training step (tasks/launch/ahead.py)."""
        return self.outputs_dir / ".ranks-ahead"

    @property
    def locks_dir(self) -> Path:
        """flock files: one preparer, one DVC command, one publisher at a time."""
        return self.outputs_dir / ".locks"


def workspace_from_environment() -> Workspace:
    """The workspace RINGFLOW_WORKSPACE names, else this checkout."""
    named = os.environ.get(WORKSPACE_ENV)
    return Workspace(Path(named).expanduser().resolve() if named else ROOT)


WORKSPACE = workspace_from_environment()
PARAMS_FILE = WORKSPACE.params_file
DVC_LOCK_FILE = WORKSPACE.dvc_lock_file
PREPARED_DIR = WORKSPACE.prepared_dir
OUTPUTS_DIR = WORKSPACE.outputs_dir
MODEL_DIR = OUTPUTS_DIR / "model"
SAVEDMODEL_DIR = OUTPUTS_DIR / "savedmodel"
METRICS_FILE = OUTPUTS_DIR / "metrics.json"
MLRUNS_DIR = WORKSPACE.mlruns_dir
GATE_FILE = OUTPUTS_DIR / "gate.json"
EVALUATION_DIR = OUTPUTS_DIR / "evaluation"
LOCKS_DIR = WORKSPACE.locks_dir
VALIDATED_STAMP = WORKSPACE.validated_stamp


def code_repository(workspace: Workspace = WORKSPACE) -> Path:
    """The repository a run's code is committed in: the project's own (its params, its model files, its prefect.yaml);
    the checkout's for a workspace of the checkout's shape, whose code folders are links to it (tests', the local
    pool worker's)."""
    return ROOT if (workspace.root / "tasks").is_symlink() else workspace.root


def resolve_path(argument: str) -> Path:
    """A path as a parameter gives it: relative paths are taken from the workspace (where params.yaml is)."""
    path = Path(argument).expanduser()
    return path if path.is_absolute() else WORKSPACE.root / path


def prediction_log_dir(log_dir: str | None) -> Path:
    """Where the model server logs its predictions and the monitor reads them (serving.log_dir; None: the
    workspace's outputs/predictions)."""
    return resolve_path(log_dir) if log_dir else OUTPUTS_DIR / "predictions"
