"""Run by test_parameter_server_input: a real parameter-server cluster in this process (two workers, one
parameter server, the coordinator, and the job's tf.data service), fed by the backend's own training input.
Prints one JSON line: the image numbers of every batch the workers took in one epoch's steps, and steps.

python -m tests.trainer.backends.ps_input_probe DATA_DIR
"""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import trainer  # noqa: F401  (tf-keras, as in every training process)


def free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"localhost:{sock.getsockname()[1]}"


def start_cluster(workers: int) -> dict:
    """Worker and ps servers in this process, each worker with its tf.data worker; TF_CONFIG for the chief."""
    import tensorflow as tf

    from trainer.backends.data_service import start_data_worker, start_dispatcher
    cluster = {"worker": [free_address() for _ in range(workers)], "ps": [free_address()], "chief": [free_address()]}
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0},
                                          "data_dispatcher": free_address()})
    spec = tf.train.ClusterSpec(cluster)
    servers = [tf.distribute.Server(spec, job_name=job, task_index=index, protocol="grpc", start=True)
               for job in ("worker", "ps") for index in range(len(cluster[job]))]
    start_dispatcher()  # in one process the dispatcher comes first: a tf.data worker waits for it to answer
    for address in cluster["worker"]:
        start_data_worker(address)
    return {"cluster": cluster, "servers": servers}


def main(data_dir: Path) -> None:
    import tensorflow as tf

    from trainer import session
    from trainer.backends.distribute import make_strategy, train_input
    from trainer.config import InputParams, JobSpec, TrainerConfig, TrainParams
    started = start_cluster(2)  # noqa: F841  (the servers live as long as this)
    job = JobSpec(data_dir=data_dir, out_dir=data_dir, checkpoint_dir=data_dir, checkpoint_owner="", augment=False,
                  data_fingerprint="f", metrics_retry_seconds=60)
    config = TrainerConfig(train=TrainParams(backend="parameter-server", np=2, batch_size=8, seed=7),
                           input=InputParams(), job=job)
    strategy = make_strategy(config)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    run = session.plan(config, processes=config.train.np)
    creator = train_input(config, run)
    per_worker = coordinator.create_per_worker_dataset(lambda: strategy.distribute_datasets_from_function(creator))
    iterator = iter(per_worker)

    @tf.function
    def numbers_of_a_batch(batches):
        images, _ = next(batches)
        pixels = tf.cast(images, tf.int64)
        return pixels[:, 0, 0, 0] + 256 * pixels[:, 0, 1, 0]

    taken = [coordinator.schedule(numbers_of_a_batch, args=(iterator,)) for _ in range(run.steps_per_epoch)]
    coordinator.join()
    print(json.dumps({"steps": run.steps_per_epoch, "batches": [value.fetch().tolist() for value in taken]}),
          flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
