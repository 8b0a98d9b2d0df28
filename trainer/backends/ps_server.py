"""A parameter-server or worker task of a parameter-server cluster: serves until it is stopped.

python -m trainer.backends.ps_server   (reads TF_CONFIG; launched by the train task next to the coordinator)
"""
from __future__ import annotations

import json
import os


def main() -> None:
    import tensorflow as tf
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task["type"] == "worker":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
                                  protocol="grpc", start=True)
    print(f"{task['type']} {task['index']} serving", flush=True)
    server.join()


if __name__ == "__main__":
    main()
