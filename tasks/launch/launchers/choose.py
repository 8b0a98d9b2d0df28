"""Which way starts a job's processes (a module each, beside this one): the backend's launcher in the registry
(trainer/backends/registry.py): `horovodrun` (Horovod's ranks), `cluster` (one process per tf.distribute task),
`process` (one process); or a scheduler's job (`slurm`), chosen by train.scheduler. A new way is one more module
beside this one and one more entry below."""
from __future__ import annotations

from tasks.launch.launchers import cluster, horovodrun, process, slurm
from tasks.launch.launchers.base import Launcher
from tasks.params import Params
from trainer.backends.registry import backend_spec

LAUNCHERS: dict[str, Launcher] = {"horovodrun": horovodrun.LAUNCHER, "cluster": cluster.LAUNCHER,
                                  "process": process.LAUNCHER}
SCHEDULERS: dict[str, Launcher] = {"slurm": slurm.LAUNCHER}  # train.scheduler: the job is the scheduler's


def launcher_for(params: Params) -> Launcher:
    """How this job's processes are started: by the scheduler's job, else by its backend's launcher (inside a
    scheduler's job, the backend's launcher in the registry says how its ranks start)."""
    if params.train.scheduler != "none":
        return SCHEDULERS[params.train.scheduler]
    return LAUNCHERS[backend_spec(params.train.backend).launcher]
