"""Which way starts a job's processes: the batch job of the scheduler train.scheduler names (trainer/choices.py),
else the launcher its backend's spec names (trainer/backend_specs.py). A new way is a module beside this one,
a class of base.py's Launcher (or Scheduler), and one entry below."""
from __future__ import annotations

from tasks.launch.launchers import cluster, horovodrun, process, slurm
from tasks.launch.launchers.base import Launcher, Scheduler
from tasks.params import Params
from trainer.backend_specs import LauncherName, backend_spec
from trainer.choices import SchedulerChoice

# by the names backend specs give their launchers
LAUNCHERS: dict[LauncherName, Launcher] = {"horovodrun": horovodrun.LAUNCHER, "cluster": cluster.LAUNCHER,
                                  "process": process.LAUNCHER}


def backend_launcher(backend: str) -> Launcher:
    """How a backend's processes start (by themselves, or inside a scheduler's allocation)."""
    return LAUNCHERS[backend_spec(backend).launcher]


# the batch jobs of the schedulers that allocate (trainer/choices.py's SCHEDULERS says which), by train.scheduler;
# none: ringflow starts the job on the hosts it names
SCHEDULER_JOBS: dict[SchedulerChoice, Scheduler] = {"slurm": slurm.SlurmScheduler(backend_launcher)}


def scheduler_for(params: Params) -> Scheduler | None:
    """The scheduler that runs this job as its own; None: ringflow starts it on the hosts it names."""
    return SCHEDULER_JOBS.get(params.train.scheduler)


def launcher_for(params: Params) -> Launcher:
    """How this job's processes are started: by the scheduler's job, else by its backend's launcher (inside a
    scheduler's job, the backend's launcher says how its ranks start)."""
    scheduler = scheduler_for(params)
    return scheduler.launcher if scheduler else backend_launcher(params.train.backend)
