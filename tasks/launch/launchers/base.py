"""What every way to start a job's processes provides, and the one command every training process runs."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from tasks.launch.remote.cleanup import stop_job_processes
from tasks.launch.supervise.processes import Process
from tasks.params import Params


class Launcher(Protocol):
    """One way to start a job's processes. Each way is a class of its own module beside this one; the methods
    written here are what a way does not need to change."""

    def processes(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                  ports: list[int] | None) -> list[Process]:
        """The job's processes (pure: it contacts no host), given Horovod's controller or None, the job's config
        file, the environment, and the ports of its servers in port_hosts' order (None: a dry run's placeholders)."""
        ...

    def port_hosts(self, params: Params) -> list[str]:
        """The host of every port the job's servers listen on (picked on those hosts before the plan is made)."""
        return []

    def listens(self, params: Params, controller: str | None) -> list[str]:
        """What the job's processes listen on, in words (docs/security.md's table)."""
        return []

    def prepare(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str]) -> None:
        """What a launch writes before the job's processes start."""
        return None

    def describe(self, params: Params, controller: str | None, config_file: Path,
                 env: dict[str, str]) -> list[str] | None:
        """How a dry run describes the job where it has no plain command per process; None: it has them."""
        return None

    def stop(self, hosts: list[str], config_file: Path) -> None:
        """Whatever ended the job: nothing of it left running on the hosts its ranks ran on."""
        stop_job_processes(hosts, str(config_file))

    def in_allocation(self, params: Params, controller: str | None, config_file: Path,
                      job_dir: Path) -> list[str] | None:
        """The batch-script lines that start the job's processes inside a Slurm allocation, in the background;
        None: this way does not run under Slurm."""
        return None


class Scheduler(Protocol):
    """A cluster's scheduler that runs the job as its own batch job (train.scheduler)."""
    launcher: Launcher  # how it starts the job's processes

    def refusal(self, params: Params) -> str | None:
        """What it refuses of a job before anything starts, in one line; None: nothing."""
        ...

    def cluster_problem(self, params: Params, controller: str | None) -> str | None:
        """What its cluster says of the job (asked in milliseconds, like a host name resolved); None: nothing."""
        ...

    def gpus_per_node(self, params: Params) -> int:
        """The GPUs each of its nodes gives a job."""
        ...

    def at_np(self, params: Params, np: int) -> Params:
        """The job at another rank count."""
        ...

    def trial_slots(self, params: Params, parallel: int) -> dict[str, int]:
        """The slots of `parallel` trials run side by side (it places each trial's job: one pool, no host)."""
        ...


def trainer_command(config_file: Path) -> list[str]:
    """One training process reading the job's configuration file."""
    return [sys.executable, "-m", "trainer", "--config", str(config_file)]
