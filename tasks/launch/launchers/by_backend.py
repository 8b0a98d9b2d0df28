"""The launcher of a backend's processes, by the name the backend registry gives it (trainer/backends/registry.py):
`horovodrun` (Horovod's ranks), `cluster` (one process per tf.distribute task), `process` (one process)."""
from __future__ import annotations

from tasks.launch.launchers import cluster, horovodrun, process
from tasks.launch.launchers.base import Launcher
from trainer.backends.registry import backend_spec

LAUNCHERS: dict[str, Launcher] = {"horovodrun": horovodrun.LAUNCHER, "cluster": cluster.LAUNCHER,
                                  "process": process.LAUNCHER}


def backend_launcher(backend: str) -> Launcher:
    """How a backend's processes start (by themselves, or inside a scheduler's allocation)."""
    return LAUNCHERS[backend_spec(backend).launcher]
