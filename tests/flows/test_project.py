"""`ringflow`, the installed command, in a project of the user's own: `ringflow init` makes one, the command finds it
from any folder inside it, and refuses in one line what is not one."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tasks.params import load_params
from tasks.params_file import render_params
from tasks.project import ringflow_version
from tasks.project_init import CODE_FOLDERS, HEADER, STARTER_MODEL
from tests.helpers import BIN, ROOT, commit_all, quiet_env, run

RINGFLOW = str(BIN / "ringflow")


def user_env(**extra: str) -> dict[str, str]:
    """A user's shell: ringflow on the PATH, no workspace named, Prefect's home not the checkout's."""
    env = quiet_env(**extra)
    env.pop("PREFECT_HOME", None)
    return env


def ringflow(*words: str, cwd: Path, timeout: float = 900, **extra: str) -> subprocess.CompletedProcess:
    return run([RINGFLOW, *words], cwd, user_env(**extra), timeout)


def last_line(done: subprocess.CompletedProcess) -> str:
    return (done.stdout + done.stderr).strip().splitlines()[-1]


def test_init_writes_a_starter_project_and_overwrites_nothing(tmp_path: Path) -> None:
    project = tmp_path / "mine"
    (project / "models").mkdir(parents=True)
    (project / "README.md").write_text("my own\n")
    done = ringflow("init", str(project), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kept README.md" in done.stdout and "git init, dvc init" in done.stdout
    assert (project / "README.md").read_text() == "my own\n"
    params = load_params(path=project / "params.yaml")
    assert params.train.model == STARTER_MODEL and (project / "models" / "model.py").is_file()
    assert (project / "params.yaml").read_text() == render_params(params.model_dump(mode="json"), HEADER)
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert {stage["cmd"] for stage in stages.values()} == {f"ringflow stage {name}" for name in stages}
    assert not [dep for stage in stages.values() for dep in stage.get("deps", []) if dep.split("/")[0] in CODE_FOLDERS]
    assert (project / ".git").is_dir() and "url = ../.dvc-remote" in (project / ".dvc" / "config").read_text()
    again = ringflow("init", cwd=project)
    assert again.returncode == 0 and "wrote nothing" in again.stdout


def test_the_project_is_found_from_a_folder_inside_it(tmp_path: Path) -> None:
    assert ringflow("init", str(tmp_path / "p"), cwd=tmp_path).returncode == 0
    inside = tmp_path / "p" / "models"
    done = ringflow("run", "--set", "train.epochs=0", cwd=inside)  # refused by the params' check: nothing starts
    assert done.returncode == 2 and "train.epochs" in last_line(done), done.stdout + done.stderr


@pytest.mark.parametrize("params_text, said", [
    (None, r"error: no ringflow project in \S+ or any folder above it: `ringflow init` makes one"),
    ("stages: [a]\n", r"error: \S+/params.yaml is not ringflow's \(it has no `project: format:` entry\) and no folder "
                      r"above holds one: run `ringflow init` in a folder of its own to start a project"),
    ("project: {format: 99}\n", r"error: \S+/params.yaml was written by a newer ringflow \(project format 99; this "
                                r"ringflow reads 1\): upgrade ringflow to run this project"),
])
def test_a_folder_that_is_not_a_project_is_one_line(params_text: str | None, said: str, tmp_path: Path) -> None:
    if params_text is not None:
        (tmp_path / "params.yaml").write_text(params_text)
    done = ringflow("run", cwd=tmp_path)
    assert done.returncode == 2 and re.fullmatch(said, last_line(done)), done.stdout + done.stderr
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / ".prefect").exists()


def test_init_refuses_a_folder_whose_params_yaml_is_not_ringflow_s(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("lr: 0.1\n")
    done = ringflow("init", cwd=tmp_path)
    assert done.returncode == 2 and last_line(done).startswith(f"error: {tmp_path / 'params.yaml'} exists and is not "
                                                               "ringflow's")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["params.yaml"]


def checkout_state() -> list[str]:
    """What git sees in ringflow's checkout, ignored files too (but Python's bytecode caches of its code)."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    return [line for line in status.splitlines() if "__pycache__" not in line]


@pytest.mark.slow
def test_ringflow_run_in_a_new_project_keeps_everything_in_it(tmp_path: Path, prefect_api: str) -> None:
    before = checkout_state()
    project = tmp_path / "project"
    assert ringflow("init", str(project), cwd=tmp_path).returncode == 0
    commit_all(project, "a ringflow project")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    done = ringflow("run", "--set", "train.epochs=2", cwd=project, PREFECT_API_URL=prefect_api)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    run_id = re.search(r"^mlflow run id:\s+(\w+)$", done.stdout, re.M)[1]  # type: ignore[index]
    tags = mlflow_tags(project, run_id)
    assert tags["mlflow.source.git.commit"] == head and tags["mlflow.source.git.repoURL"] == str(project)
    assert tags["ringflow.version"] == ringflow_version() != "unknown"
    assert (project / "dvc.lock").is_file() and (project / ".dvc-remote").is_dir()
    assert (project / "outputs" / "savedmodel").is_dir() and (project / "data" / "prepared" / "manifest.json").is_file()
    assert checkout_state() == before  # nothing written into ringflow's checkout


def mlflow_tags(project: Path, run_id: str) -> dict[str, str]:
    """The run's tags, read from the project's own store by a process of its own."""
    script = ("import json, sys, mlflow; c = mlflow.MlflowClient(sys.argv[1]); "
              "print(json.dumps(c.get_run(sys.argv[2]).data.tags))")
    done = run([str(BIN / "python"), "-c", script, f"sqlite:///{project / 'mlruns' / 'mlflow.db'}", run_id], project,
               quiet_env())
    assert done.returncode == 0, done.stderr[-2000:]
    tags: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return tags


def test_the_command_runs_from_outside_the_checkout_without_its_folders() -> None:
    assert os.access(RINGFLOW, os.X_OK)
    done = subprocess.run([RINGFLOW, "--help"], cwd="/", capture_output=True, text=True, env=user_env())
    assert done.returncode == 0 and "ringflow init [DIR]" in done.stdout
