"""The ways to start a job's processes, one module each, chosen by the backend's launcher in the registry
(trainer/backends/registry.py): `horovodrun` (Horovod's ranks), `cluster` (one process per tf.distribute task),
`process` (one process). A new way (a scheduler's) is one more module here and one more entry below."""
from __future__ import annotations

from tasks.launch.launchers import cluster, horovodrun, process
from tasks.launch.launchers.base import Launcher
from tasks.params import Params
from trainer.backends.registry import backend_spec

LAUNCHERS: dict[str, Launcher] = {"horovodrun": horovodrun.LAUNCHER, "cluster": cluster.LAUNCHER,
                                  "process": process.LAUNCHER}


def launcher_for(params: Params) -> Launcher:
    """How this job's processes are started (its backend's launcher)."""
    return LAUNCHERS[backend_spec(params.train.backend).launcher]
