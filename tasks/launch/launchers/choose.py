"""Which way starts a job's processes: a scheduler's job (`slurm`), chosen by train.scheduler, else the backend's
launcher (by_backend.py). A new way is one more module beside this one and one more entry below or there."""
from __future__ import annotations

from tasks.launch.launchers import slurm
from tasks.launch.launchers.base import Launcher, Scheduler
from tasks.launch.launchers.by_backend import backend_launcher
from tasks.params import Params

SCHEDULERS: dict[str, Scheduler] = {"slurm": slurm.SCHEDULER}  # train.scheduler: the job is the scheduler's


def scheduler_for(params: Params) -> Scheduler | None:
    """The scheduler that runs this job as its own; None: ringflow starts it on the hosts it names."""
    return SCHEDULERS.get(params.train.scheduler)


def launcher_for(params: Params) -> Launcher:
    """How this job's processes are started: by the scheduler's job, else by its backend's launcher (inside a
    scheduler's job, the backend's launcher says how its ranks start)."""
    scheduler = scheduler_for(params)
    return scheduler.launcher if scheduler else backend_launcher(params.train.backend)
