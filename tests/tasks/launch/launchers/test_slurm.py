"""The Slurm launcher: one follower process that speaks for every rank, the script written beside the model (where
it outlives a failed training), a dry run's description, and Slurm, not this machine, deciding the GPUs."""
from __future__ import annotations

import sys
from pathlib import Path

from tasks.launch.launchers.choose import SCHEDULER_JOBS, launcher_for
from tasks.launch.launchers.slurm import job_dir
from tasks.params import load_params

LAUNCHER = SCHEDULER_JOBS["slurm"].launcher
PARAMS = load_params({"train.scheduler": "slurm", "slurm.nodes": 2, "slurm.tasks_per_node": 2,
                      "slurm.pending_timeout_minutes": 5, "slurm.sbatch_args": ["--constraint=a100"]})


def test_a_slurm_job_is_chosen_by_the_scheduler_whatever_the_backend() -> None:
    assert launcher_for(PARAMS) is LAUNCHER
    assert launcher_for(load_params({"train.scheduler": "slurm", "train.backend": "multiworker"})) is LAUNCHER
    assert launcher_for(load_params({})) is not LAUNCHER


def test_one_follower_speaks_for_all_ranks_and_slurm_decides_the_gpus(tmp_path: Path) -> None:
    config = tmp_path / ".model.tmp-1" / "trainer_config.json"
    [follower] = LAUNCHER.processes(PARAMS, "mpi", config, {"CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin"}, None)
    assert follower.command == [sys.executable, "-m", "tasks.launch.slurm.follow", str(tmp_path / "slurm" / "job.sh"),
                                str(tmp_path / "slurm"), "4", "5", "3", "--constraint=a100"]
    assert follower.label is None and len(follower.hosts) == 4  # a rank per task, placed when they say where
    assert "CUDA_VISIBLE_DEVICES" not in follower.env and follower.env["PATH"] == "/usr/bin"


def test_the_script_is_written_beside_the_model_and_a_dry_run_shows_it(tmp_path: Path) -> None:
    config = tmp_path / ".model.tmp-1" / "trainer_config.json"
    assert job_dir(config) == tmp_path / "slurm"
    LAUNCHER.prepare(PARAMS, "mpi", config, {})
    written = (tmp_path / "slurm" / "job.sh").read_text()
    described = LAUNCHER.describe(PARAMS, "mpi", config, {})
    script = tmp_path / "slurm" / "job.sh"
    assert described is not None
    assert described[0] == f"slurm: sbatch --parsable --constraint=a100 {script}, with {script}:"
    assert "\n".join(described[1:]) + "\n" == written and written.startswith("#!/bin/bash\n")
