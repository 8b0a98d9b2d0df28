"""A process under srun finds its rank whoever started it, and a multiworker job's TF_CONFIG is built from the
allocation's node files (each node's name and the ports it picked)."""
from __future__ import annotations

import json
import socket
from pathlib import Path

from trainer.slurm_cluster import (
    allocation_tf_config,
    rank_from_environment,
    set_tf_config_from_allocation,
    write_node_ports,
)


def test_the_launchers_own_rank_comes_before_slurms() -> None:
    assert rank_from_environment({"SLURM_PROCID": "0", "HOROVOD_RANK": "3"}) == "3"  # horovodrun in an allocation
    assert rank_from_environment({"SLURM_PROCID": "5", "PMIX_RANK": "5"}) == "5"
    assert rank_from_environment({"SLURM_PROCID": "2"}) == "2"
    assert rank_from_environment({"PATH": "/usr/bin"}) is None


def test_each_node_writes_free_ports_and_every_worker_builds_the_same_cluster(tmp_path: Path) -> None:
    for node, name in enumerate(["gpu02", "gpu01"]):
        write_node_ports(tmp_path, 2, {"SLURMD_NODENAME": name, "SLURM_NODEID": str(node)})
    records = [json.loads((tmp_path / f"node-{node}.json").read_text()) for node in (0, 1)]
    for port in records[0]["ports"]:  # free when picked: this machine can listen on it
        with socket.socket() as probe:
            probe.bind(("", port))
    config = allocation_tf_config(tmp_path, {"SLURM_PROCID": "3"})
    workers = [f"gpu02:{port}" for port in records[0]["ports"]] + [f"gpu01:{port}" for port in records[1]["ports"]]
    assert config == {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 3}}


def test_tf_config_is_set_only_under_a_slurm_multiworker_job(tmp_path: Path) -> None:
    write_node_ports(tmp_path, 1, {"SLURMD_NODENAME": "n1", "SLURM_NODEID": "0"})
    env = {"RINGFLOW_SLURM_PORTS": str(tmp_path), "SLURM_PROCID": "0"}
    set_tf_config_from_allocation(env)
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}
    untouched = {"TF_CONFIG": "{}", "RINGFLOW_SLURM_PORTS": str(tmp_path), "SLURM_PROCID": "0"}
    set_tf_config_from_allocation(untouched)
    assert untouched["TF_CONFIG"] == "{}"
    plain: dict[str, str] = {}
    set_tf_config_from_allocation(plain)
    assert plain == {}


def test_workers_built_from_the_allocation_each_take_their_own_gpu_on_their_node(tmp_path: Path) -> None:
    """Two nodes of two workers: worker k's GPU slot is its place among its node's workers (SLURM_LOCALID)."""
    from trainer.backends.task_devices import local_gpu_slot
    for node, name in enumerate(["gpu01", "gpu02"]):
        write_node_ports(tmp_path, 2, {"SLURMD_NODENAME": name, "SLURM_NODEID": str(node)})
    slots = [local_gpu_slot(allocation_tf_config(tmp_path, {"SLURM_PROCID": str(rank)}), "MultiWorkerMirroredStrategy")
             for rank in range(4)]
    assert slots == [0, 1, 0, 1]
