"""--dry-run: prepare and preflight, then the launch plan and every rank's share of the data; nothing trains."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import PYTHON, make_workspace, workspace_env

DRY_RUNS = {  # name: the overrides of a dry run
    "horovod": ["np=9", "batch_size=16"],
    "hosts down": ["train.hosts=h1.invalid:1,h2.invalid:1", "np=2"],
    "parameter-server": ["train.backend=parameter-server"],
    "own model": ["train.model=models/net.py:build", "train.model_args={units: 4}"],
    "bad model": ["train.model=models/net.py:build"],
    "bad gate metric": ["registry.metric=test_mae"],  # a classifier has no mean absolute error
}
OWN_MODEL = """import tensorflow as tf


def build(input_shape, outputs, units=8):
    return tf.keras.Sequential([tf.keras.layers.Input(input_shape), tf.keras.layers.Flatten(),
                                tf.keras.layers.Dense(outputs, activation="softmax")])
"""
FILES = {"own model": {"models/net.py": OWN_MODEL},  # what the user wrote into the workspace
         "bad model": {"models/net.py": OWN_MODEL.replace("Dense(outputs", "Dense(outputs // 2")}}


@dataclass(frozen=True)
class DryRun:
    done: subprocess.CompletedProcess
    workspace: Path


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DryRun]:
    """Each dry run in a workspace of its own, all at once (each is mostly imports and the digits' conversion)."""
    started = {}
    for name, overrides in DRY_RUNS.items():
        workspace = make_workspace(tmp_path_factory.mktemp("dry-run"))
        for name_in_workspace, content in FILES.get(name, {}).items():
            (workspace / name_in_workspace).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name_in_workspace).write_text(content)
        command = [PYTHON, "-m", "flows.pipeline", "--dry-run", *(f"--set={value}" for value in overrides)]
        started[name] = workspace, subprocess.Popen(command, cwd=workspace, env=workspace_env(workspace),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = {}
    for name, (workspace, process) in started.items():
        stdout, stderr = process.communicate(timeout=300)
        finished[name] = DryRun(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr),
                                workspace)
    return finished


def test_a_dry_run_prints_the_launch_and_data_plans_and_trains_nothing(dry_runs: dict[str, DryRun]) -> None:
    done, repo = dry_runs["horovod"].done, dry_runs["horovod"].workspace
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    launch = lines[lines.index("launch:") + 1]
    assert launch.startswith("rank 0 on localhost, ") and "rank 8 on localhost: " in launch
    assert "horovodrun_cli.py --mpi -np 9 -H localhost:9" in launch  # auto: MPI, built by set-up
    assert "-m trainer --config" in launch
    plan = lines[lines.index("data:") + 1:]
    assert len(plan) == 9 and all(line.startswith(f"rank {rank}: ") for rank, line in enumerate(plan))
    records = [int(line.split()[2]) for line in plan]
    assert sum(records) == 1257 and max(records) - min(records) <= 1
    assert all(", 8 steps of 16, " in line for line in plan)
    assert not (repo / "mlruns").exists() and not (repo / "outputs" / "runs").exists()


def test_a_dry_run_with_hosts_that_are_down_contacts_none_and_says_so(dry_runs: dict[str, DryRun]) -> None:
    """The plan is pure: hosts that neither resolve nor answer still get their plan, marked as not checked."""
    done = dry_runs["hosts down"].done
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    steps = next(line for line in lines if line.startswith("steps: "))
    assert steps.startswith("steps: prepare -> preflight -> ") and steps.endswith(" -> publish")
    launch = lines[lines.index("launch:") + 1]
    assert launch.startswith("rank 0 on h1.invalid, rank 1 on h2.invalid: ")
    assert "hosts not checked (a dry run contacts no host): h1.invalid, h2.invalid" in lines


def test_a_dry_run_of_a_cluster_backend_leaves_ports_to_the_launch(dry_runs: dict[str, DryRun]) -> None:
    done = dry_runs["parameter-server"].done
    assert done.returncode == 0, done.stderr[-2000:]
    launch = done.stdout.split("launch:\n", 1)[1].split("data:\n", 1)[0].splitlines()
    assert [line.split(":", 1)[0] for line in launch] == ["worker0 on localhost", "worker1 on localhost",
                                                          "ps0 on localhost", "chief0 on localhost", "listens",
                                                          "listens"]


def test_a_model_of_the_user_s_own_is_built_once_before_anything_starts(dry_runs: dict[str, DryRun]) -> None:
    """The preflight builds the workspace's model file on the CPU for the data's shapes: a good one passes, one
    whose outputs do not fit the classes is one line naming its file and line, exit 2, nothing launched."""
    good = dry_runs["own model"].done
    assert good.returncode == 0 and "launch:" in good.stdout, good.stderr[-2000:]
    bad, workspace = dry_runs["bad model"].done, dry_runs["bad model"].workspace
    assert bad.returncode == 2 and "launch:" not in bad.stdout
    assert bad.stderr.strip().splitlines()[-1] == (
        f"error: {workspace / 'models' / 'net.py'}:4: models/net.py:build gives outputs of shape (1, 5), but the "
        "data needs [batch, 10]: 10 per example")


def test_a_gate_metric_the_run_will_not_have_is_refused_before_anything_starts(dry_runs: dict[str, DryRun]) -> None:
    done = dry_runs["bad gate metric"].done
    assert done.returncode == 2 and "launch:" not in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: registry.metric 'test_mae' is no test metric of a classification run (test_accuracy, ")
