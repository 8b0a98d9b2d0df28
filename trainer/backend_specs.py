"""The one backend registry: every fact about a training backend, looked up by name.

Preflight, the launch plan and the ranks' own plan all ask a backend's spec (how it is launched, its replicas and
input pipelines, hence its global batch); no other code compares backend names. Imports no TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# horovodrun: one process per rank; cluster: one process per TF_CONFIG task, started by ringflow; process: one
LauncherName = Literal["horovodrun", "cluster", "process"]
# how the replicas are formed: Horovod's one replica per rank, or the tf.distribute strategy of that name
Replication = Literal["horovod", "MirroredStrategy", "MultiWorkerMirroredStrategy", "CentralStorageStrategy",
                      "OneDeviceStrategy", "ParameterServerStrategy"]


@dataclass(frozen=True)
class BackendSpec:
    """One backend: the module whose `train(config)` a process runs, how its processes are started, how its
    replicas are formed, and whether Horovod's elastic mode can run it (`elastic_module`)."""
    name: str
    module: str
    launcher: LauncherName
    replication: Replication
    custom_loop: bool = False  # a GradientTape loop instead of Keras fit
    elastic_module: str | None = None
    logical_cpu_devices: bool = False  # without GPUs, np logical CPU devices in one process

    @property
    def horovod(self) -> bool:
        """Launched by horovodrun: Horovod's build and controller matter."""
        return self.launcher == "horovodrun"

    @property
    def single_process(self) -> bool:
        """One training process, whatever np says (its replicas are devices of that process)."""
        return self.launcher == "process"

    @property
    def elastic_capable(self) -> bool:
        return self.elastic_module is not None

    @property
    def with_servers(self) -> bool:
        """Parameter servers and worker servers plus a coordinator (which runs the tf.data dispatcher)."""
        return self.replication == "ParameterServerStrategy"

    @property
    def one_process_per_slot(self) -> bool:
        """Its processes fill the listed hosts' slots (np must fit in them)."""
        return self.launcher in ("horovodrun", "cluster")

    def module_for(self, elastic: bool) -> str:
        """The module one process runs (Horovod's elastic loop around the same fit when elastic)."""
        return self.elastic_module if elastic and self.elastic_module else self.module

    def replicas(self, np: int, gpus_per_host: int) -> int:
        """Replicas in sync for one optimizer step: one per Horovod rank or multiworker worker (each has one GPU of
        its host, or its CPU: task_devices.py); mirrored, central-storage: every local GPU, else np logical CPU
        devices; one-device: one; parameter-server: one worker's (workers step independently), one."""
        if self.replication in ("horovod", "MultiWorkerMirroredStrategy"):
            return np
        if self.replication in ("MirroredStrategy", "CentralStorageStrategy"):
            return gpus_per_host or np
        return 1

    def input_pipelines(self, np: int) -> int:
        """Input pipelines the training split is cut for: one per Horovod rank or multiworker worker, else one
        (parameter-server workers share one through the tf.data service)."""
        return np if self.replication in ("horovod", "MultiWorkerMirroredStrategy") else 1

    def global_batch(self, batch_size: int, np: int, gpus_per_host: int) -> int:
        """Records per optimizer step (train.batch_size is per replica)."""
        return batch_size * self.replicas(np, gpus_per_host)

    def pipeline_batches(self, batch_size: int, np: int, gpus_per_host: int) -> tuple[int, int]:
        """(input pipelines, the batch each reads per step): the global batch shared among the pipelines."""
        pipelines = self.input_pipelines(np)
        return pipelines, self.global_batch(batch_size, np, gpus_per_host) // pipelines


def _tf_distribute(name: str, replication: Replication, launcher: LauncherName,
                   logical_cpu_devices: bool = False) -> BackendSpec:
    tape = name.endswith("-tape")
    module = "trainer.backends.distribute_tape" if tape else "trainer.backends.distribute"
    return BackendSpec(name, module, launcher, replication, custom_loop=tape,
                       logical_cpu_devices=logical_cpu_devices)


REGISTRY: dict[str, BackendSpec] = {spec.name: spec for spec in (
    # Keras fit with hvd.DistributedOptimizer; elastic: the same fit in Horovod's elastic loop
    BackendSpec("horovod", "trainer.backends.horovod_fit", "horovodrun", "horovod",
                elastic_module="trainer.backends.horovod_elastic"),
    # a custom loop with hvd.DistributedGradientTape
    BackendSpec("horovod-tape", "trainer.backends.horovod_tape", "horovodrun", "horovod", custom_loop=True),
    # tf.distribute strategies through Keras fit, or through the guide's custom loop (strategy.run)
    _tf_distribute("mirrored", "MirroredStrategy", "process", logical_cpu_devices=True),
    _tf_distribute("multiworker", "MultiWorkerMirroredStrategy", "cluster"),
    _tf_distribute("central-storage", "CentralStorageStrategy", "process", logical_cpu_devices=True),
    _tf_distribute("one-device", "OneDeviceStrategy", "process"),
    _tf_distribute("parameter-server", "ParameterServerStrategy", "cluster"),
    _tf_distribute("mirrored-tape", "MirroredStrategy", "process", logical_cpu_devices=True),
    _tf_distribute("multiworker-tape", "MultiWorkerMirroredStrategy", "cluster"),
)}
BACKEND_NAMES = tuple(REGISTRY)


def backend_spec(name: str) -> BackendSpec:
    """The spec of a backend by name (names are validated by the params model: an unknown one is a bug)."""
    return REGISTRY[name]
