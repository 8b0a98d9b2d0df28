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


def dir_hashes(folder: Path) -> dict[str, str]:
    """Every file below folder (relative path -> sha256)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def git(repo: Path, *args: str) -> None:
    import subprocess
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=test", *args], cwd=repo, check=True,
                   capture_output=True)


def test_a_second_clone_pulls_every_output_dvc_lock_records(tmp_path: Path, prefect_api: str) -> None:
    import yaml
    first = copy_checkout(_mkdir(tmp_path / "first"))
    env = quiet_env()
    done = run([str(BIN / "dvc"), "remote", "modify", "local", "url", str(tmp_path / "shared-remote")], first, env)
    assert done.returncode == 0, done.stderr
    params = yaml.safe_load((first / "params.yaml").read_text())
    params["train"]["epochs"] = 2
    (first / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git(first, "commit", "-qam", "a shared remote; 2 epochs")
    done = run([PYTHON, "-m", "flows.pipeline"], first, quiet_env(PREFECT_API_URL=prefect_api))
    assert done.returncode == 0 and "dvc:            recorded in dvc.lock and pushed" in done.stdout, \
        done.stdout[-2000:] + done.stderr[-2000:]
    git(first, "commit", "-qam", "the run's dvc.lock")
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(first), str(second))
    if not (second / ".venv").exists():
        (second / ".venv").symlink_to(first / ".venv")
    pulled = run([str(BIN / "dvc"), "pull"], second, env)
    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr[-2000:]
    recorded = [out["path"] for stage in yaml.safe_load((second / "dvc.lock").read_text())["stages"].values()
                for out in stage.get("outs", []) if "md5" in out and out["md5"].endswith(".dir")]
    assert set(recorded) == {"data/prepared", "outputs/model", "outputs/savedmodel"}
    for path in recorded:
        assert dir_hashes(second / path) == dir_hashes(first / path), path


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
