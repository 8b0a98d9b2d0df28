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


@pytest.fixture()
def credentials(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This shell's MLflow credentials (ringflow:hunter2, as client.env gives them), no server named for them yet
    (RINGFLOW_CREDENTIALS_FOR and MLFLOW_TRACKING_URI unset, and MLflow's own), the client's retries off; every
    setting put back at the test's end."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ringflow")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    for name in ("MLFLOW_TRACKING_TOKEN", "RINGFLOW_CREDENTIALS_FOR", "MLFLOW_TRACKING_URI"):
        monkeypatch.setenv(name, "")  # recorded, so that what the code under test sets is put back
        monkeypatch.delenv(name)
    # MLflow's own tracking URI of this process, which a test before may have set (model_registry sets it when it
    # registers) and which wins over MLFLOW_TRACKING_URI: unset, so that the client reads the environment's
    monkeypatch.setattr("mlflow.tracking._tracking_service.utils._tracking_uri", None)
    return monkeypatch
