"""`ringflow`, the installed command, in a project of the user's own: `ringflow init` makes one, the command finds it
from any folder inside it, and refuses in one line what is not one."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from tasks.params import load_params
from tasks.params_file import render_params
from tasks.project import ringflow_version
from tasks.project_init import CODE_FOLDERS, HEADER, STARTER_MODEL
from tests.examples.test_examples import module
from tests.helpers import BIN, ROOT, commit_all, drawn_digit, free_port, quiet_env, run, wait_for_http
from tests.installed import installed_ringflow
from trainer.protocol import weights_digests

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
    deployments = yaml.safe_load((project / "prefect.yaml").read_text())["deployments"]
    assert {tuple(next(iter(step)) for step in deployment["pull"]) for deployment in deployments} == \
        {("prefect.deployments.steps.git_clone", "flows.pull_steps.enter_project")}  # each run: a clone of the commit
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


OWN_MODEL = "own-image-model"  # the example whose subclassed Keras model (its own train_step) grace trains


def new_project(folder: Path, example: str | None = None) -> str:
    """A project made by `ringflow init` (with an example's model, data and params.yaml in it, at the example's
    paths, as a user brings their own), committed; its commit."""
    assert ringflow("init", str(folder), cwd=folder.parent).returncode == 0
    if example:
        shutil.copytree(ROOT / "examples" / example, folder / "examples" / example,
                        ignore=shutil.ignore_patterns("data", "__pycache__"))
        module(folder / "examples" / example / "make_data.py").make_data(
            folder / "examples" / example / "data" / "digits-png", 30)
        shutil.copy(folder / "examples" / example / "params.yaml", folder / "params.yaml")
    commit_all(folder, "a ringflow project")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_two_projects_side_by_side_each_keep_their_runs_and_models(tmp_path: Path, prefect_api: str) -> None:
    """Two projects of one install: `ringflow run` (np 2, Horovod) and the model server in one, a sweep in the other:
    each project's store holds its own runs only, each run names its project's commit, the checkout is untouched."""
    before = checkout_state()
    heads = {"ada": new_project(tmp_path / "ada"), "grace": new_project(tmp_path / "grace", OWN_MODEL)}
    done = ringflow("run", "--set", "train.epochs=2", cwd=tmp_path / "grace", PREFECT_API_URL=prefect_api)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    digests = [digest for _, digest in weights_digests(said)]
    assert len(digests) == 2 and len(set(digests)) == 1, said[-2000:]  # np 2: both ranks' weights equal
    swept = ringflow("sweep", "--set", "sweep.trials=1", "--set", "train.epochs=1", "--set", "train.np=1",
                     cwd=tmp_path / "ada", PREFECT_API_URL=prefect_api)
    assert swept.returncode == 0, (swept.stdout + swept.stderr)[-3000:]
    for name, head in heads.items():
        tags = [run["tags"] for run in project_runs(tmp_path / name).values()]
        assert {run_tags["mlflow.source.git.repoURL"] for run_tags in tags} == {str(tmp_path / name)}
        assert {run_tags["mlflow.source.git.commit"] for run_tags in tags} == {head}
        assert {run_tags["ringflow.version"] for run_tags in tags} == {ringflow_version()}
    assert len(project_runs(tmp_path / "ada")) == 2  # the sweep and its trial
    (grace_run,) = project_runs(tmp_path / "grace").values()
    assert grace_run["params"]["model.source"].startswith(f"examples/{OWN_MODEL}/model.py:build@")
    assert served_class(tmp_path / "grace") in [str(digit) for digit in range(10)]
    assert checkout_state() == before  # nothing written into ringflow's checkout


def served_class(project: Path) -> str:
    """`ringflow serve-model` in the project: the class its champion gives a drawn 7; then Ctrl-C, exit 130."""
    port = free_port()
    server = subprocess.Popen([RINGFLOW, "serve-model", f"--set=serving.port={port}"], cwd=project,
                              env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, server)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/ringflow:predict", json.dumps(
            {"instances": [{"b64": base64.b64encode(drawn_digit(7)).decode()}]}).encode())
        with urllib.request.urlopen(request, timeout=60) as answer:
            predicted: str = json.loads(answer.read())["predictions"][0]["classes"]
    finally:
        server.send_signal(signal.SIGINT)
    assert server.wait(30) == 130
    return predicted


def project_runs(project: Path) -> dict[str, dict[str, dict[str, str]]]:
    """Every run of the project's store: its tags and params, by run id (read by a process of its own)."""
    script = ("import json, sys, mlflow; c = mlflow.MlflowClient(sys.argv[1]); "
              "print(json.dumps({r.info.run_id: {'tags': r.data.tags, 'params': r.data.params} "
              "for e in c.search_experiments() "
              "for r in c.search_runs([e.experiment_id])}))")
    done = run([str(BIN / "python"), "-c", script, f"sqlite:///{project / 'mlruns' / 'mlflow.db'}"], project,
               quiet_env())
    assert done.returncode == 0, done.stderr[-2000:]
    runs: dict[str, dict[str, dict[str, str]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return runs


def test_the_command_runs_from_outside_the_checkout_without_its_folders() -> None:
    assert os.access(RINGFLOW, os.X_OK)
    done = subprocess.run([RINGFLOW, "--help"], cwd="/", capture_output=True, text=True, env=user_env())
    assert done.returncode == 0 and "ringflow init [DIR]" in done.stdout


def test_a_wheel_of_the_checkout_installed_elsewhere_starts_a_project(tmp_path: Path) -> None:
    """`pip install` of a wheel built from the checkout (not an editable install: the package's files only, the
    starter's dvc.yaml and prefect.yaml copied into it) into an environment of its own: its `ringflow init` writes a
    project and plans a run there (--dry-run: the data prepared, the ranks' launch from the installed code).
    (Its `ringflow services`: tests/scripts/test_services_cluster.py.)"""
    installed = installed_ringflow(tmp_path)
    site_packages = next(installed.parent.glob("lib/python*/site-packages"))
    env = user_env(PATH=f"{installed}{os.pathsep}{os.environ['PATH']}")
    assert run([str(installed / "ringflow"), "init", "mine"], tmp_path, env).returncode == 0
    planned = run(["ringflow", "run", "--dry-run"], tmp_path / "mine", env)
    assert planned.returncode == 0, (planned.stdout + planned.stderr)[-2000:]
    assert f"{site_packages}/tasks/launch/horovodrun_cli.py --mpi -np 2" in planned.stdout  # the installed code
    assert (tmp_path / "mine" / "data" / "prepared" / "manifest.json").is_file()
