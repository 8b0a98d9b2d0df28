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


@pytest.fixture(scope="session")
def shared_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URI of one SQLite MLflow store, made once (a new store costs seconds of migrations)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('shared-store') / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        mlflow_store.client().search_experiments()
    return uri


@pytest.fixture()
def shared_store(shared_database: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """MLFLOW_TRACKING_URI on the shared store for this test (each test makes an experiment of its own)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", shared_database)
    return shared_database
