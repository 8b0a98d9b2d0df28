"""DVC for real: prepared data pushed to the default remote comes back identical after deletion; a clone of the
checkout of the session's whole pipeline run (tests/pipeline_run.py) pulls every output its dvc.lock records."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.helpers import BIN, PYTHON, copy_checkout, quiet_env, run
from tests.pipeline_run import PipelineRun, dir_hashes, recorded_folders

pytestmark = pytest.mark.slow  # real DVC commands
TEST_GROUP = "the session's pipeline run"  # tests/pipeline_run.py: made once, on one worker (tests/parallel.py)


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


def git(repo: Path, *args: str) -> None:
    import subprocess
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=test", *args], cwd=repo, check=True,
                   capture_output=True)


def test_a_second_clone_pulls_every_output_dvc_lock_records(pipeline_run: PipelineRun, tmp_path: Path) -> None:
    """The first checkout is the session's whole pipeline run's: it recorded its outputs in dvc.lock and pushed them
    to its default remote. A clone of it holding that dvc.lock, its remote set to that one, pulls every one of them
    as the run wrote them (taken when the run ended: other tests restore and train in that checkout)."""
    assert "dvc:            recorded in dvc.lock and pushed" in pipeline_run.output, pipeline_run.output[-2000:]
    remote = pipeline_run.repo / ".dvc-remote"  # the default remote, ../.dvc-remote from .dvc/
    assert remote.is_dir()
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(pipeline_run.repo), str(second))
    if not (second / ".venv").exists():
        (second / ".venv").symlink_to(pipeline_run.repo / ".venv")
    (second / "dvc.lock").write_text(pipeline_run.dvc_lock)  # as if committed there (never in the shared checkout)
    env = quiet_env()
    done = run([str(BIN / "dvc"), "remote", "modify", "--local", "local", "url", str(remote)], second, env)
    assert done.returncode == 0, done.stderr
    pulled = run([str(BIN / "dvc"), "pull"], second, env)
    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr[-2000:]
    recorded = recorded_folders((second / "dvc.lock").read_text())
    assert set(recorded) == {"data/prepared", "outputs/model", "outputs/savedmodel"}
    for path in recorded:
        assert dir_hashes(second / path) == pipeline_run.outputs[path], path


def test_commands_run_in_one_process_and_a_failure_names_its_command_with_dvc_s_message(tmp_path: Path) -> None:
    from tasks.versioning.dvc import _dvc
    _dvc(["init", "--no-scm"], ["config", "core.autostage", "false"], root=tmp_path)
    assert "autostage = false" in (tmp_path / ".dvc" / "config").read_text()  # both ran, in order
    with pytest.raises(RuntimeError, match=r"^dvc push no-such-stage failed: .*no-such-stage") as failure:
        _dvc(["status"], ["push", "no-such-stage"], ["config", "core.autostage", "true"], root=tmp_path)
    assert "autostage = false" in (tmp_path / ".dvc" / "config").read_text(), failure.value  # the rest did not run


def test_the_version_step_runs_dvc_again_only_when_the_data_its_record_or_the_remote_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.versioning import dvc
    repo = copy_checkout(tmp_path)
    done = run([PYTHON, "-m", "tasks", "prepare"], repo, quiet_env())
    assert done.returncode == 0, done.stderr[-2000:]
    committed: list[tuple[str, ...]] = []
    real = dvc.commit_stages

    def counted(*stages: str, root: Path) -> None:
        committed.append(stages)
        real(*stages, root=root)
    monkeypatch.setattr(dvc, "commit_stages", counted)
    first = dvc.version_data(repo)
    assert dvc.version_data(repo) == first and committed == [("prepare",)]  # unchanged: no DVC process
    shard = sorted((repo / "data" / "prepared").glob("*.tfrecord"))[0]
    shard.write_bytes(shard.read_bytes())  # the same bytes written again: the same data
    assert dvc.version_data(repo) == first and len(committed) == 1
    (repo / "data" / "prepared" / "notes.txt").write_text("a file more")
    second = dvc.version_data(repo)
    assert second.data_hash != first.data_hash and len(committed) == 2
    assert second.data_hash in (repo / "dvc.lock").read_text()
    (repo / ".dvc" / "config.local").write_text("[core]\n    remote = other\n['remote \"other\"']\n"
                                                "    url = ../other-remote\n")
    dvc.version_data(repo)  # another remote: pushed there
    assert len(committed) == 3 and any((repo / "other-remote").rglob("*.dir"))
    dvc.version_data(repo)
    assert len(committed) == 3
