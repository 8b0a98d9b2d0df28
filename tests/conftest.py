"""Fixtures: a real Prefect server on a free 127.0.0.1 port, prepared digits data."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import trainer  # noqa: F401  (first: the tf-keras switch, before any TensorFlow import)
from tests.helpers import BIN, free_port, quiet_env, wait_for_http


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """PREFECT_API_URL of a Prefect server started for the test session."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = quiet_env(PREFECT_HOME=str(home))
    log = open(home / "server.log", "w")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}/api"
    try:
        wait_for_http(f"{api}/health", 120, server)
        yield api
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def digits_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in dataset prepared into a temporary directory."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    out = tmp_path_factory.mktemp("data") / "prepared"
    prepare(DataParams(), out)
    return out
