"""One-process backends (mirrored, central-storage, one-device and their custom loops): one training process here."""
from __future__ import annotations

import shlex
from pathlib import Path

from tasks.launch.launchers.base import Launcher, trainer_command
from tasks.launch.slurm.commands import SRUN
from tasks.launch.supervise.processes import Process
from tasks.params import Params


class ProcessLauncher(Launcher):
    """One training process here (or one task of one node under Slurm)."""

    def processes(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                  ports: list[int] | None) -> list[Process]:
        """The one process, rank 0."""
        return [Process(trainer_command(config_file), env, "0")]

    def in_allocation(self, params: Params, controller: str | None, config_file: Path, job_dir: Path) -> list[str]:
        """Under Slurm: the one process, a step of one task on one node."""
        return [f"{shlex.join(SRUN)} --nodes=1 --ntasks=1 {shlex.join(trainer_command(config_file))} &"]


LAUNCHER = ProcessLauncher()
