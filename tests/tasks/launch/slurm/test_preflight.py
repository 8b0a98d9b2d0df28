"""The Slurm preflight's first line on a machine without the Slurm commands (the test cluster's Slurm checks the
rest: tests/tasks/launch/test_slurm_cluster.py)."""
from __future__ import annotations

import pytest

from tasks.launch.slurm.preflight import slurm_problem
from tasks.params import load_params


def test_without_the_slurm_commands_the_job_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    problem = slurm_problem(load_params({"train.scheduler": "slurm"}), "mpi")
    assert problem == ("train.scheduler slurm: sbatch, squeue, scontrol, scancel, sinfo, srun not found on PATH "
                       "(run on the cluster's head or login node)")


def test_a_backend_that_does_not_run_under_slurm_is_named_first() -> None:
    params = load_params({"train.scheduler": "slurm", "train.backend": "parameter-server"})
    assert (slurm_problem(params, None) or "").startswith("backend parameter-server does not run under Slurm yet")
