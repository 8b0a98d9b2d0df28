"""A parameter-server or worker task of a parameter-server cluster: serves until it is stopped. A worker also runs
a tf.data worker of the job's tf.data service, which feeds it (and any consumer) its part of each epoch.

python -m trainer.backends.ps_server --job CONFIG_FILE   (reads TF_CONFIG; launched by the train task next to the
coordinator; --job names the job it serves, so that its processes can be found and stopped on every host)
"""
from __future__ import annotations

import argparse
import json
import os

from trainer.backends.data_service import start_data_worker
from trainer.backends.task_devices import pin_task_gpu
from trainer.heartbeat import start_heartbeat
from trainer.lean_imports import skip_unused_libraries


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trainer.backends.ps_server", description=__doc__)
    parser.add_argument("--job", help="the job's configuration file (its name on the command line is what counts)")
    parser.parse_args(argv)
    start_heartbeat()  # a frozen server is as silent as a frozen rank
    skip_unused_libraries()
    import tensorflow as tf
    pin_task_gpu("ParameterServerStrategy")  # a worker its own GPU; a parameter server none
    tf_config = json.loads(os.environ["TF_CONFIG"])
    task = tf_config["task"]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task["type"] == "worker":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
                                  protocol="grpc", start=True)
    print(f"{task['type']} {task['index']} serving", flush=True)
    if task["type"] == "worker":
        start_data_worker(tf_config["cluster"]["worker"][task["index"]])
    server.join()


if __name__ == "__main__":
    main()
