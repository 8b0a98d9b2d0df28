"""A job's processes under Slurm's srun: their rank from the environment whoever started them, and the
tf.distribute cluster of a multiworker job built from the allocation (ports picked on each node by a first step,
`python -m trainer.slurm_cluster ports DIR N`, each node's in a file the workers read). Imports no TensorFlow.
"""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Mapping

# where a process finds its rank, in this order: horovodrun (Gloo) sets HOROVOD_RANK, mpirun OMPI_COMM_WORLD_RANK,
# srun's PMIx and PMI-2 plugins PMIX_RANK and PMI_RANK, srun itself SLURM_PROCID (last: inside an allocation every
# process horovodrun starts on the batch host inherits the batch shell's SLURM_PROCID 0)
RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
PORTS_DIR_ENV = "RINGFLOW_SLURM_PORTS"  # set by the batch script of a multiworker job


def rank_from_environment(env: Mapping[str, str]) -> str | None:
    """A job process's rank, from the variables its launcher set (None: none did)."""
    return next((env[key] for key in RANK_VARIABLES if key in env), None)


def pick_ports(count: int) -> list[int]:
    """`count` TCP ports free on this node now (the kernel's pick, released for the workers to bind)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:
            each.bind(("", 0))
        return [each.getsockname()[1] for each in sockets]
    finally:
        for each in sockets:
            each.close()


def write_node_ports(ports_dir: Path, count: int, env: Mapping[str, str] = os.environ) -> Path:
    """This node's name and its workers' ports, in the file of its node id."""
    record = {"host": env["SLURMD_NODENAME"], "ports": pick_ports(count)}
    path = ports_dir / f"node-{int(env['SLURM_NODEID'])}.json"
    ports_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return path


def allocation_tf_config(ports_dir: Path, env: Mapping[str, str] = os.environ) -> dict:
    """TF_CONFIG of this worker: node by node (their ids' order), each node's workers on its ports; this worker is
    the SLURM_PROCID-th (srun's block distribution: a node's tasks are consecutive)."""
    nodes = sorted(ports_dir.glob("node-*.json"), key=lambda path: int(path.stem.split("-")[1]))
    records = [json.loads(path.read_text()) for path in nodes]
    workers = [f"{record['host']}:{port}" for record in records for port in record["ports"]]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": int(env["SLURM_PROCID"])}}


def set_tf_config_from_allocation(env: dict[str, str] | os._Environ = os.environ) -> None:
    """A multiworker process started by srun gets its TF_CONFIG from the node files (nothing otherwise)."""
    ports_dir = env.get(PORTS_DIR_ENV)
    if ports_dir and "TF_CONFIG" not in env:
        env["TF_CONFIG"] = json.dumps(allocation_tf_config(Path(ports_dir), env))


if __name__ == "__main__" and sys.argv[1:2] == ["ports"]:
    write_node_ports(Path(sys.argv[2]), int(sys.argv[3]))
