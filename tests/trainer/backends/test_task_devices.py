"""Each tf.distribute task's GPU: the computing tasks of a host take its GPUs in turn, as Horovod's local ranks do;
parameter servers and the coordinator take none. (No GPU here: the choice is tested, and that without GPUs
nothing is pinned.)"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tasks.paths import ROOT
from tests.helpers import quiet_env
from trainer.backends.task_devices import local_gpu_slot

MULTIWORKER = {"worker": ["h1:1000", "h1:1001", "h2:1000", "h1:1002"]}
PARAMETER_SERVER = {"worker": ["h1:1", "head:2", "h1:3"], "ps": ["head:4"], "chief": ["head:5"]}


def task(cluster: dict, kind: str, index: int) -> dict:
    return {"cluster": cluster, "task": {"type": kind, "index": index}}


@pytest.mark.parametrize(("index", "slot"), [(0, 0), (1, 1), (2, 0), (3, 2)])
def test_multiworker_workers_of_a_host_take_its_gpus_in_turn(index: int, slot: int) -> None:
    assert local_gpu_slot(task(MULTIWORKER, "worker", index), "MultiWorkerMirroredStrategy") == slot


@pytest.mark.parametrize(("kind", "index", "slot"), [("worker", 0, 0), ("worker", 1, 0), ("worker", 2, 1),
                                                     ("ps", 0, None), ("chief", 0, None)])
def test_parameter_server_workers_take_a_gpu_and_servers_and_coordinator_none(kind: str, index: int,
                                                                            slot: int | None) -> None:
    assert local_gpu_slot(task(PARAMETER_SERVER, kind, index), "ParameterServerStrategy") == slot


def test_without_a_gpu_every_task_keeps_its_cpu() -> None:
    probe = ("from trainer.backends.task_devices import pin_task_gpu; import tensorflow as tf; "
             "pin_task_gpu('MultiWorkerMirroredStrategy'); print(len(tf.config.get_visible_devices('CPU')))")
    env = quiet_env(TF_CONFIG=json.dumps(task(MULTIWORKER, "worker", 1)), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.split()[-1] == "1", done.stderr[-2000:]
