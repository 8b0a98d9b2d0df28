"""A real MLflow store in a temporary folder for the tracking tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.tracking import mlflow_store

EXPERIMENT = "registry-test"


@pytest.fixture()
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """MLFLOW_TRACKING_URI on a fresh SQLite store; the test experiment keeps its artifacts in tmp_path."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow_store.client().create_experiment(EXPERIMENT, artifact_location=(tmp_path / "artifacts").as_uri())
    return tmp_path
