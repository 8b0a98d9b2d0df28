"""Fixtures: the test session's real Prefect server on 127.0.0.1, prepared digits data."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

import trainer  # noqa: F401  (first: the tf-keras switch, before any TensorFlow import)

# `make test` runs on parallel workers: which tests share a worker, in what order (tests/parallel.py)
from tests.parallel import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: F401

# the whole pipeline's run, once per session: tests/flows/test_pipeline.py and tests/tasks/versioning/test_dvc.py
from tests.pipeline_run import pipeline_run  # noqa: F401


def pytest_itemcollected(item: pytest.Item) -> None:
    """A system test that fails runs once more (pytest-rerunfailures), its first failure listed as RERUN: with the
    whole suite on 2 cores, real servers and TensorFlow clusters have failed at random, about once a run, in a test
    that passes alone (a Prefect server's start, a collective op); a test of a broken feature fails both times."""
    if item.get_closest_marker("slow"):
        item.add_marker(pytest.mark.flaky(reruns=1))


# No test may reach a Prefect server it did not start, nor start one in the checkout: until a test asks for the
# session's server, flows would find none here (port 9, discard).
os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"


@pytest.fixture(scope="session", autouse=True)
def registry_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pipeline's registry key of this test session, which every registration signs with and every model
    server checks (tasks/tracking/registry_signature.py): never the key of the account that runs the tests."""
    from tasks.tracking.registry_signature import KEY_ENV
    path = tmp_path_factory.getbasetemp() / "registry-key" / "registry.key"
    os.environ[KEY_ENV] = str(path)
    return path


@pytest.fixture(autouse=True)
def launches_ask_hosts_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's own launch on hosts (in this process, whose workspace is the checkout) writes its shared-filesystem
    token in the session's folder, not the checkout's outputs/ (another test checks that nothing appears there). Its
    hosts see that folder when they share this machine's filesystem: the test cluster's share /tmp, --private ones
    have their own."""
    import sys
    for name in ("tasks.launch.preflight", "tasks.launch.job"):
        if name in sys.modules:
            monkeypatch.setattr(sys.modules[name], "OUTPUTS_DIR", tmp_path_factory.getbasetemp() / "outputs")


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """PREFECT_API_URL of the test session's Prefect server, started once as a flow starts the local server
    (servers/local_prefect.py) and inherited by every process a test starts after it is asked for."""
    from servers.local_prefect import ensure_server, stop_server
    from tests.helpers import free_port
    home = tmp_path_factory.mktemp("prefect-home")
    note, _ = ensure_server(home, free_port())  # not 4200: parallel test sessions start one each
    os.environ["PREFECT_API_URL"] = note.api_url
    try:
        yield note.api_url
    finally:
        stop_server(home)


@pytest.fixture(autouse=True)
def slow_tests_share_the_prefect_server(request: pytest.FixtureRequest) -> None:
    """Every system test's flows report to the session's server (none starts a temporary or local one)."""
    if request.node.get_closest_marker("slow"):
        request.getfixturevalue("prefect_api")


@pytest.fixture(scope="session")
def digits_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in dataset prepared into a temporary directory."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    out = tmp_path_factory.mktemp("data") / "prepared"
    prepare(DataParams(), out)
    return out



class Said:
    """What ringflow's components said through tasks/logs.py while a test ran, as `[component] text` lines."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog

    def lines(self, component: str | None = None) -> list[str]:
        from tasks.logs import ROOT_LOGGER
        records = {id(record): record for record in self.caplog.records
                   if record.name.startswith(f"{ROOT_LOGGER}.")}  # each once (root and ringflow's handler alike)
        return [f"[{record.name.removeprefix(f'{ROOT_LOGGER}.')}] {record.getMessage()}" for record in records.values()
                if component is None or record.name == f"{ROOT_LOGGER}.{component}"]


@pytest.fixture
def said(caplog: pytest.LogCaptureFixture) -> Iterator[Said]:
    """The lines said (pytest's caplog, hearing ringflow's loggers where a process's set-up keeps them from the
    root)."""
    import logging

    from tasks.logs import ROOT_LOGGER
    ringflow = logging.getLogger(ROOT_LOGGER)
    ringflow.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, ROOT_LOGGER)
    yield Said(caplog)
    ringflow.removeHandler(caplog.handler)
