"""The GPU of each tf.distribute task, as the Horovod backends pin one GPU per local rank: the tasks that compute
(multiworker's workers, parameter-server's workers) take their host's GPUs in turn, one each, with memory growth;
parameter servers and the coordinator see none. A slot of a GPU host is one of its GPUs (preflight counts them so),
so a task per slot never shares one. Without a GPU nothing changes.
"""
from __future__ import annotations

import json
import os

# the task types that run the model's steps, by replication strategy
COMPUTING = {"MultiWorkerMirroredStrategy": ("chief", "worker"), "ParameterServerStrategy": ("worker",)}


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0]


def local_gpu_slot(tf_config: dict, replication: str) -> int | None:
    """This task's place among the computing tasks of the cluster on its host (its GPU, modulo the host's count);
    None for a task that computes nothing."""
    computing = COMPUTING.get(replication, ())
    task, cluster = tf_config["task"], tf_config["cluster"]
    if task["type"] not in computing:
        return None
    host = _host(cluster[task["type"]][task["index"]])
    on_host = [(kind, index) for kind in computing for index, address in enumerate(cluster.get(kind, []))
               if _host(address) == host]
    return on_host.index((task["type"], task["index"]))


def pin_task_gpu(replication: str) -> None:
    """Before TensorFlow's runtime starts: this task sees only its own GPU, grown as needed (or none)."""
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    if not gpus or "task" not in tf_config:
        return
    slot = local_gpu_slot(tf_config, replication)
    own = [] if slot is None else [gpus[slot % len(gpus)]]
    for gpu in own:
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.set_visible_devices(own, "GPU")
