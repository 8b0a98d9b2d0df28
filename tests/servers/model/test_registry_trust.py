"""The registry is not a way to run code on the serving host: against a real MLflow registry (a temporary SQLite
store) and real SavedModels, the model server serves the versions the pipeline registered (log_registered_model)
and refuses, in one line each and without loading them with TensorFlow, a version written into the registry by
other means or whose files changed in the artifact store since; a refused version is downloaded once, wherever
the alias goes; the alias removed is said once."""
from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import unquote, urlparse

import numpy as np
import pytest

from servers.model.champion import Champion, ChampionWatcher
from servers.model.served_model import NotServable, ServedModel, load_version
from tasks.tracking import mlflow_store, registry_signature
from tasks.tracking.model_registry import CHALLENGER, CHAMPION, encoded_examples, log_registered_model
from tests.conftest import Said
from tests.helpers import PYTHON, ROOT, free_port, quiet_env, wait_for_http
from tests.servers.model.test_server import start
from tests.tasks.tracking.test_model_registry import CLASS_NAMES, tiny_savedmodel

pytestmark = pytest.mark.slow
NAME, EXPERIMENT = "ringflow", "trust-test"
WARM_UP = encoded_examples(np.zeros((1, 8, 8, 1), np.float32))


@dataclass(frozen=True)
class Registry:
    uri: str
    folder: Path
    savedmodel: Path
    served: str  # the version the pipeline registered first, made champion

    def client(self) -> Any:
        import mlflow
        return mlflow.MlflowClient(self.uri)

    def champion(self, version: str) -> None:
        self.client().set_registered_model_alias(NAME, CHAMPION, version)

    def files(self, version: str) -> Path:
        """The version's MLflow model in the artifact store (a folder of this machine)."""
        return Path(unquote(urlparse(self.client().get_model_version_download_uri(NAME, version)).path))


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A store whose champion is a version the pipeline's function registered; the pipeline's key in the folder."""
    folder = tmp_path_factory.mktemp("trust")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setenv(registry_signature.KEY_ENV, str(folder / "key" / "registry.key"))
        mlflow_store.client().create_experiment(EXPERIMENT, artifact_location=(folder / "artifacts").as_uri())
        store = Registry(uri, folder, tiny_savedmodel(folder / "savedmodel"), "")
        store = Registry(uri, folder, store.savedmodel, pipeline_version(store))
        store.champion(store.served)
        yield store


def pipeline_version(registry: Registry) -> str:
    """A version registered as the pipeline's register step does."""
    run_id = mlflow_store.start_run(EXPERIMENT, {}, {})
    return log_registered_model(run_id, registry.savedmodel, np.zeros((2, 8, 8, 1), np.float32), CLASS_NAMES, NAME)


def plain_version(registry: Registry, tags: dict[str, str]) -> str:
    """A version made with MlflowClient alone: the served version's files copied to a new place, `tags` on it."""
    copy = registry.folder / f"copy-{time.monotonic_ns()}"
    shutil.copytree(registry.files(registry.served), copy)
    client = registry.client()
    return str(client.create_model_version(NAME, copy.as_uri(), tags=tags).version)


class Watching:
    """A ChampionWatcher over the served version, polling every 0.1 s, its loads counted."""

    def __init__(self, registry: Registry, with_challenger: bool = False) -> None:
        self.loads: list[str] = []
        self.champion = Champion(load_version(NAME, registry.served, WARM_UP), with_challenger)
        self.watcher = ChampionWatcher(self.champion, 0.1, WARM_UP, load=self.counted(load_version))

    def counted(self, load: Callable[[str, str, list[bytes]], ServedModel]) -> Callable[..., ServedModel]:
        def counting(name: str, version: str, warm_up: list[bytes]) -> ServedModel:
            self.loads.append(version)
            return load(name, version, warm_up)
        return counting

    def settle(self, version: str) -> None:
        """Wait until the watcher serves or refuses `version`, then five polls more."""
        self.until(lambda: version in self.champion.refused or self.champion.model.version == version)
        time.sleep(0.5)

    def until(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, "the watcher did not get there within 60 s"
            time.sleep(0.05)


@pytest.fixture()
def watching(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Iterator[Watching]:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry.uri)
    monkeypatch.setenv(registry_signature.KEY_ENV, str(registry.folder / "key" / "registry.key"))
    registry.champion(registry.served)
    watching = Watching(registry)
    try:
        yield watching
    finally:
        watching.watcher.close()
        registry.champion(registry.served)


def test_a_version_the_pipeline_registered_is_served(registry: Registry, watching: Watching,
                                                     said: Said) -> None:
    promoted = pipeline_version(registry)
    registry.champion(promoted)
    watching.until(lambda: watching.champion.model.version == promoted)
    assert watching.champion.model.classify(WARM_UP).classes[0] in CLASS_NAMES
    assert watching.loads == [promoted] and f"ringflow v{promoted} answers now" in said.lines("serve-model")[-1]


def test_versions_not_registered_by_the_pipeline_are_refused_once_and_the_served_one_stays(
        registry: Registry, watching: Watching, said: Said) -> None:
    unsigned = plain_version(registry, {})
    signed = registry.client().get_model_version(NAME, registry.served).tags
    copied = plain_version(registry, {key: value for key, value in signed.items() if key.startswith("ringflow.")})
    for version in (unsigned, copied, registry.served, unsigned, copied):  # away to the served one, and back
        registry.champion(version)
        watching.settle(version)
    assert watching.champion.model.version == registry.served and watching.loads == [unsigned, copied]
    refused = [line for line in said.lines("serve-model") if "refused" in line]
    assert len(refused) == 2
    assert f"ringflow v{unsigned} was not registered by ringflow's pipeline" in refused[0]
    assert f"ringflow v{copied}'s signature does not hold for this version" in refused[1]
    assert all(line.endswith(f"still serving v{registry.served}") for line in refused)


def test_a_version_whose_files_changed_since_it_was_registered_is_refused(
        registry: Registry, watching: Watching, said: Said) -> None:
    altered = pipeline_version(registry)
    variables = next((registry.files(altered)).rglob("variables.data-*"))
    with open(variables, "ab") as file:
        file.write(b"\0")
    registry.champion(altered)
    watching.until(lambda: altered in watching.champion.refused)
    time.sleep(0.5)
    assert watching.champion.model.version == registry.served and watching.loads == [altered]
    assert "SavedModel is not the one registered" in watching.champion.refused[altered]
    assert "its files changed since: refused" in said.lines("serve-model")[-1]
    with pytest.raises(NotServable, match="its files changed since"):
        load_version(NAME, altered, WARM_UP)


def test_the_alias_removed_is_said_once_and_the_served_version_stays(
        registry: Registry, watching: Watching, said: Said) -> None:
    registry.client().delete_registered_model_alias(NAME, CHAMPION)
    time.sleep(1)  # ten polls
    registry.champion(registry.served)
    time.sleep(0.5)
    lines = said.lines("serve-model")
    assert lines == [f"[serve-model] ringflow: no version holds the alias {CHAMPION} now: still serving "
                     f"v{registry.served}", f"[serve-model] ringflow: the alias {CHAMPION} is on v{registry.served} "
                     "again"]
    assert watching.champion.model.version == registry.served and watching.loads == []


def test_a_challenger_is_loaded_beside_the_champion_and_promoted_without_a_second_load(
        registry: Registry, watching: Watching, said: Said) -> None:
    watching.watcher.close()  # this test's watcher serves the challenger too
    watching.champion = Champion(watching.champion.model, with_challenger=True)
    watching.watcher = ChampionWatcher(watching.champion, 0.1, WARM_UP, load=watching.counted(load_version))
    challenger = pipeline_version(registry)
    registry.client().set_registered_model_alias(NAME, CHALLENGER, challenger)
    watching.until(lambda: watching.champion.labelled(CHALLENGER) is not None)
    assert watching.champion.model.version == registry.served
    registry.champion(challenger)  # promoted: it answers as champion at once, the old one retired
    watching.until(lambda: watching.champion.model.version == challenger)
    assert watching.loads == [challenger] and [model.version for model in watching.champion.versions()] == [challenger]
    registry.client().delete_registered_model_alias(NAME, CHALLENGER)
    watching.until(lambda: watching.champion.labelled(CHALLENGER) is None)
    watching.until(lambda: f"{CHALLENGER} no more" in "".join(said.lines("serve-model")[-1:]))  # said after the change
    assert watching.champion.model.version == challenger
    assert said.lines("serve-model")[-3:] == [
        f"[serve-model] ringflow v{challenger} answers as {CHALLENGER} now (loaded and warmed with 1 image in "
        f"{watching.champion.model.load_seconds:.1f} s)",
        f"[serve-model] ringflow v{challenger} answers now (loaded already; v{registry.served} retired)",
        f"[serve-model] ringflow: no version holds the alias {CHALLENGER} now: v{challenger} answers as "
        f"{CHALLENGER} no more"]


def ended(server: subprocess.Popen) -> int | None:
    """The server's exit status within 120 s; None (and the server stopped) when it is still running then."""
    try:
        return server.wait(120)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(30)
        return None


def test_a_server_whose_champion_is_not_the_pipelines_does_not_start(registry: Registry, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry_signature.KEY_ENV, str(registry.folder / "key" / "registry.key"))
    unsigned = plain_version(registry, {})
    registry.champion(unsigned)
    try:
        assert ended(start(registry.uri, free_port(), tmp_path / "server.log")) == 2
    finally:
        registry.champion(registry.served)
    assert (tmp_path / "server.log").read_text().splitlines()[-1] == (
        f"error: ringflow v{unsigned} was not registered by ringflow's pipeline (no signed SavedModel digest among "
        "its tags): refused")
    monkeypatch.setenv(registry_signature.KEY_ENV, str(tmp_path / "another.key"))  # a host with another key
    registry_signature.pipeline_key()
    assert ended(start(registry.uri, free_port(), tmp_path / "other-key.log")) == 2
    assert (tmp_path / "other-key.log").read_text().splitlines()[-1].startswith(
        f"error: ringflow v{registry.served}'s signature does not hold for this version with the registry key "
        f"{tmp_path / 'another.key'}")


def test_a_server_waiting_for_a_champion_waits_past_one_it_refuses(registry: Registry, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """make serve's model server (--wait-for-champion) outlives a champion it refuses: one line, then it serves
    the next champion the pipeline registered."""
    monkeypatch.setenv(registry_signature.KEY_ENV, str(registry.folder / "key" / "registry.key"))
    unsigned = plain_version(registry, {})
    registry.champion(unsigned)
    port, log = free_port(), tmp_path / "server.log"
    waiting = subprocess.Popen([PYTHON, "-m", "servers.model", "--wait-for-champion", "--set", f"serving.port={port}",
                                "--set", "serving.poll_seconds=1", "--set", f"serving.log_dir={tmp_path / 'logged'}"],
                               cwd=ROOT,
                               env=quiet_env(MLFLOW_TRACKING_URI=registry.uri), stdout=open(log, "w"),
                               stderr=subprocess.STDOUT)
    try:
        refusal = f"ringflow v{unsigned} was not registered by ringflow's pipeline"
        deadline = time.monotonic() + 120
        while refusal not in log.read_text():
            assert waiting.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(3)  # three polls more: the refused version is neither loaded nor said again
        registry.champion(registry.served)
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, waiting)
    finally:
        registry.champion(registry.served)
        waiting.terminate()
        waiting.wait(30)
    assert log.read_text().count(refusal) == 1
