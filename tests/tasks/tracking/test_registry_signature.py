"""The pipeline's signature of a registered version: the SavedModel's digest over its files' paths and contents,
the key (made once, 0600, refused when open to others or a link), and the tags log_registered_model records, in a
real MLflow store."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest

from tasks.tracking import mlflow_store, registry_signature
from tasks.tracking.model_registry import CHAMPION, decide_gate, score_registered_model
from tasks.tracking.registry_signature import DIGEST_TAG, KEY_ID_TAG, SIGNATURE_TAG, Untrusted
from tests.tasks.tracking.conftest import EXPERIMENT
from tests.tasks.tracking.test_model_registry import CLASS_NAMES, logged, registered_run, tiny_savedmodel


@pytest.fixture()
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RINGFLOW_REGISTRY_KEY on a file not made yet, in a folder not made yet."""
    path = tmp_path / "keys" / "registry.key"
    monkeypatch.setenv(registry_signature.KEY_ENV, str(path))
    return path


def folder_of(tmp_path: Path, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "savedmodel"
    for relative, content in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)
    return folder


def test_the_digest_covers_every_files_path_and_content(tmp_path: Path) -> None:
    files = {"saved_model.pb": b"graph", "variables/variables.index": b"index", "variables/variables.data": b"v"}
    digest = registry_signature.savedmodel_digest(folder_of(tmp_path / "a", files))
    assert digest == registry_signature.savedmodel_digest(folder_of(tmp_path / "b", dict(reversed(files.items()))))
    appended = registry_signature.savedmodel_digest(folder_of(tmp_path / "c", {**files, "saved_model.pb": b"graph\0"}))
    renamed = {"saved_model.pb": b"graph", "variables/variables.index": b"index", "variables/variables.dat": b"v"}
    added = {**files, "assets/extra": b""}
    assert len({digest, appended, registry_signature.savedmodel_digest(folder_of(tmp_path / "d", renamed)),
                registry_signature.savedmodel_digest(folder_of(tmp_path / "e", added))}) == 4
    linked = folder_of(tmp_path / "f", files)
    (linked / "variables" / "variables.data").unlink()
    (linked / "variables" / "variables.data").symlink_to(tmp_path / "a" / "savedmodel" / "variables" / "variables.data")
    with pytest.raises(Untrusted, match="not a plain file or folder"):
        registry_signature.savedmodel_digest(linked)


def test_the_key_is_made_once_private_and_refused_when_others_could_change_it(key_file: Path) -> None:
    key = registry_signature.pipeline_key()
    assert registry_signature.pipeline_key() == key == registry_signature.read_key() and len(key) >= 32
    assert (os.stat(key_file).st_mode & 0o777, os.stat(key_file.parent).st_mode & 0o777) == (0o600, 0o700)
    assert os.listdir(key_file.parent) == [key_file.name]  # no temporary file left
    key_file.chmod(0o640)
    with pytest.raises(Untrusted, match="has mode 640: other accounts may read or write it"):
        registry_signature.read_key()
    key_file.chmod(0o600)
    link = key_file.with_name("link.key")
    link.symlink_to(key_file)
    with pytest.raises(Untrusted, match="a link is refused"):
        registry_signature.read_key(link)
    with pytest.raises(Untrusted, match="no registry key at .*missing.key"):
        registry_signature.read_key(key_file.with_name("missing.key"))


def test_a_registered_version_carries_the_signed_digest_of_its_savedmodel(store_dir: Path, key_file: Path) -> None:
    savedmodel = tiny_savedmodel(store_dir / "savedmodel")
    run_id = mlflow_store.start_run(EXPERIMENT, {}, {})
    version = logged(run_id, savedmodel, np.zeros((2, 8, 8, 1), np.float32))
    tags = mlflow_store.client().get_model_version("gate-test", version).tags
    key = registry_signature.read_key()
    digest = registry_signature.savedmodel_digest(savedmodel)
    assert tags[DIGEST_TAG] == digest and tags[KEY_ID_TAG] == registry_signature.key_id(key)
    assert registry_signature.verify(key, "gate-test", version, tags, savedmodel, CLASS_NAMES) == digest
    with pytest.raises(Untrusted, match="signature does not hold"):  # copied onto another version
        registry_signature.verify(key, "gate-test", str(int(version) + 1), tags, savedmodel, CLASS_NAMES)
    with pytest.raises(Untrusted, match="signature does not hold"):  # other class names
        registry_signature.verify(key, "gate-test", version, tags, savedmodel, CLASS_NAMES[::-1])
    with pytest.raises(Untrusted, match="signature does not hold"):  # another key
        registry_signature.verify(b"k" * 64, "gate-test", version, tags, savedmodel, CLASS_NAMES)
    assert tags[SIGNATURE_TAG] != registry_signature.signature(b"k" * 64, "gate-test", version, digest, CLASS_NAMES)


def test_the_gate_never_runs_a_champion_the_pipeline_did_not_sign(store_dir: Path, key_file: Path) -> None:
    """The champion is scored by running its SavedModel on the pipeline's host: a version written into the
    registry by other means, or altered since, is not run; the new version is not blocked by it."""
    client = mlflow_store.client()
    signed = registered_run(tiny_savedmodel(store_dir / "savedmodel"), 0.9)
    files = Path(unquote(urlparse(client.get_model_version_download_uri("gate-test", signed)).path))
    shutil.copytree(files, store_dir / "copied")
    unsigned = client.create_model_version("gate-test", (store_dir / "copied").as_uri()).version
    scored: list[Path] = []

    def score(champion: object) -> float | None:
        return score_registered_model(champion, store_dir, lambda savedmodel, _: scored.append(savedmodel) or 0.99)
    client.set_registered_model_alias("gate-test", CHAMPION, unsigned)
    decision = decide_gate("gate-test", signed, 0.5, 0.01, "split-a", score)
    assert (decision.alias, decision.champion_accuracy, scored) == (CHAMPION, None, [])
    assert decision.note == (f"{CHAMPION} v{unsigned} not scored: gate-test v{unsigned} was not registered by "
                             "ringflow's pipeline (no signed SavedModel digest among its tags): refused")
    with open(next(files.rglob("variables.index")), "ab") as file:
        file.write(b"\0")
    client.set_registered_model_alias("gate-test", CHAMPION, signed)
    decision = decide_gate("gate-test", unsigned, 0.5, 0.01, "split-a", score)
    assert (decision.alias, scored) == (CHAMPION, []) and "its files changed since" in decision.note
