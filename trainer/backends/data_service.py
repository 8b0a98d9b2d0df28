"""The tf.data service of a parameter-server job: the dispatcher runs in the coordinator, a tf.data worker in
each worker process. The launcher puts the dispatcher's address in TF_CONFIG under "data_dispatcher"."""
from __future__ import annotations

import json
import os
from typing import Any

JOB_NAME = "training"  # one job per dispatcher; a dispatcher lives as long as one training job
_running: list[Any] = []  # servers stop when collected: keep them for the life of the process


def dispatcher_address() -> str:
    """host:port of the job's dispatcher."""
    return json.loads(os.environ["TF_CONFIG"])["data_dispatcher"]


def start_dispatcher() -> str:
    """Start the dispatcher in this process (the coordinator) unless it runs already; its address."""
    import tensorflow as tf
    address = dispatcher_address()
    if any(isinstance(server, tf.data.experimental.service.DispatchServer) for server in _running):
        return address
    config = tf.data.experimental.service.DispatcherConfig(port=int(address.rsplit(":", 1)[1]))
    _running.append(tf.data.experimental.service.DispatchServer(config))
    return address


def start_data_worker(own_address: str) -> None:
    """Start a tf.data worker in this process, registered under this host's name (blocks until the dispatcher,
    which starts with the coordinator, answers)."""
    import tensorflow as tf
    service = tf.data.experimental.service
    config = service.WorkerConfig(dispatcher_address=dispatcher_address(),
                                  worker_address=f"{own_address.rsplit(':', 1)[0]}:%port%")
    _running.append(service.WorkerServer(config))
