"""DVC for real: prepared data pushed to the default remote comes back identical after deletion."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests.helpers import BIN, PYTHON, copy_checkout, quiet_env, run


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
