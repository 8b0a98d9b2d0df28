"""What every way to start a job's processes provides, and the one command every training process runs."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tasks.launch.remote.cleanup import stop_job_processes
from tasks.launch.supervise.processes import Process
from tasks.params import Params

# the processes of a job: (params, Horovod's controller or None, the job's config file, the environment, the ports
# of its servers in port_hosts' order or None for a dry run's placeholders)
ProcessPlan = Callable[[Params, "str | None", Path, dict[str, str], "list[int] | None"], list[Process]]


# what the job's processes listen on, in words (params, Horovod's controller or None): docs/security.md's table
Listening = Callable[[Params, "str | None"], list[str]]
# what a launch writes before its processes start (params, controller, the job's config file, the environment)
Prepare = Callable[[Params, "str | None", Path, dict[str, str]], None]
# how the job is described where it has no plain command per process (a dry run prints it), else None
Describe = Callable[[Params, "str | None", Path, dict[str, str]], "list[str] | None"]
# the batch-script lines that start the job's processes inside a Slurm allocation, in the background (params,
# controller, the job's config file, the job's directory); None: it does not run under Slurm
InAllocation = Callable[[Params, "str | None", Path, Path], list[str]]
# whatever ended the job, nothing of it left running: (the hosts its ranks ran on, the job's config file)
Stop = Callable[[list[str], Path], None]


@dataclass(frozen=True)
class Launcher:
    """One way to start a job's processes: their plan (pure: it contacts no host), the host of every port its
    servers listen on (picked on those hosts by the job before the plan), what listens, in words; what a launch
    writes first, how a dry run describes it, how the job's processes are stopped on every host, and how they start
    inside a scheduler's allocation."""
    processes: ProcessPlan
    port_hosts: Callable[[Params], list[str]] = lambda params: []
    listens: Listening = lambda params, controller: []
    prepare: Prepare = lambda params, controller, config_file, env: None
    describe: Describe = lambda params, controller, config_file, env: None
    stop: Stop = lambda hosts, config_file: stop_job_processes(hosts, str(config_file))
    in_allocation: InAllocation | None = None


@dataclass(frozen=True)
class Scheduler:
    """A cluster's scheduler that runs the job as its own batch job (train.scheduler): its launcher; what it refuses
    of a job before anything starts; what its cluster says of the job (asked in milliseconds, like a host name
    resolved; params, Horovod's controller or None); the GPUs of each of its nodes; the job at another rank count;
    and the slots of trials run side by side (it places each trial's job: one pool for the cluster, no host)."""
    launcher: Launcher
    refusal: Callable[[Params], "str | None"]
    cluster_problem: Callable[[Params, "str | None"], "str | None"]
    gpus_per_node: Callable[[Params], int]
    at_np: Callable[[Params, int], Params]
    trial_slots: Callable[[Params, int], dict[str, int]]


def trainer_command(config_file: Path) -> list[str]:
    """One training process reading the job's configuration file."""
    return [sys.executable, "-m", "trainer", "--config", str(config_file)]
