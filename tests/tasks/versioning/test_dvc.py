"""DVC for real: prepared data pushed to the default remote comes back identical after deletion."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.helpers import BIN, PYTHON, copy_checkout, quiet_env, run

pytestmark = pytest.mark.slow  # real DVC commands


def file_hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_push_delete_pull_restores_identical_data(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    env = quiet_env()
    for step in ("prepare", "version"):
        done = run([PYTHON, "-m", "tasks", step], repo, env)
        assert done.returncode == 0, done.stderr[-2000:]
    data_version = done.stdout.strip().rsplit(" ", 1)[-1]
    prepared = repo / "data" / "prepared"
    before = file_hashes(prepared)
    assert "manifest.json" in before and "validation.json" in before and len(before) == 26
    shutil.rmtree(prepared)
    shutil.rmtree(repo / ".dvc" / "cache")
    pulled = run([str(BIN / "dvc"), "pull", "prepare"], repo, env)
    assert pulled.returncode == 0, pulled.stderr[-2000:]
    assert file_hashes(prepared) == before
    status = run([str(BIN / "dvc"), "status", "prepare"], repo, env)
    assert "Data and pipelines are up to date." in status.stdout, status.stdout
    assert data_version.endswith(".dir") and data_version in (repo / "dvc.lock").read_text()


def test_restore_brings_back_the_data_of_an_earlier_version(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    env = quiet_env()
    versions = {}
    for min_shards in (8, 4):
        params = (repo / "params.yaml").read_text().replace("min_shards: 8", f"min_shards: {min_shards}")
        (repo / "params.yaml").write_text(params)
        for step in ("prepare", "version"):
            done = run([PYTHON, "-m", "tasks", step], repo, env)
            assert done.returncode == 0, done.stderr[-2000:]
        versions[done.stdout.strip().rsplit(" ", 1)[-1]] = file_hashes(repo / "data" / "prepared")
    first, second = versions
    assert first != second and len(versions[second]) == 4 * 3 + 2
    ignored = (repo / "data" / ".gitignore").read_text()
    shutil.rmtree(repo / ".dvc" / "cache")  # the remote alone has to serve it
    done = run([PYTHON, "-m", "tasks", "restore", "--data-hash", first], repo, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert file_hashes(repo / "data" / "prepared") == versions[first]
    assert (repo / "data" / ".gitignore").read_text() == ignored
    assert sorted(p.name for p in (repo / "data").iterdir()) == [".gitignore", "prepared"]
