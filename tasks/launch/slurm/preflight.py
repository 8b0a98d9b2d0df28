"""Before a Slurm job is submitted, each problem one line: the Slurm commands missing, the partition unknown, more
nodes or tasks per node than the partition has, no MPI plugin for Horovod's MPI ranks, or the job refused by
`sbatch --test-only` (an unknown account or QOS, a time limit over the partition's)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tasks.launch.slurm.batch_script import sbatch_options, unsupported
from tasks.launch.slurm.commands import SlurmError, mpi_plugins, slurm, test_submit
from tasks.params import Params
from trainer.choices import controller_spec

NEEDED = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")


def partitions() -> dict[str, tuple[int, int]]:
    """Each partition's node count and the CPUs of its smallest node; the default one first (`sinfo`)."""
    found: dict[str, tuple[int, int]] = {}
    lines = slurm(["sinfo", "-h", "-o", "%P|%D|%c"]).stdout.split()
    for line in sorted(lines, key=lambda line: not line.split("|")[0].endswith("*")):
        name, nodes, cpus = line.split("|")
        known = found.get(name.rstrip("*"), (0, int(cpus.rstrip("+"))))
        found[name.rstrip("*")] = (known[0] + int(nodes), min(known[1], int(cpus.rstrip("+"))))
    return found


def shape_problem(params: Params) -> str | None:
    """The job's shape against its partition's (sinfo)."""
    slurm_params, known = params.slurm, partitions()
    if not known:
        return "sinfo lists no partition: the cluster has no nodes ringflow may use"
    name = slurm_params.partition or next(iter(known))
    if name not in known:
        return f"slurm.partition {name}: no such partition (the cluster has {', '.join(known)})"
    nodes, cpus = known[name]
    if slurm_params.nodes > nodes:
        return f"slurm.nodes {slurm_params.nodes} exceeds the {nodes} nodes of partition {name}"
    if slurm_params.tasks_per_node * slurm_params.cpus_per_task > cpus:
        return (f"slurm.tasks_per_node {slurm_params.tasks_per_node} x cpus_per_task {slurm_params.cpus_per_task} "
                f"exceeds the {cpus} CPUs of partition {name}'s nodes")
    return None


def refusal(params: Params) -> str | None:
    """What `sbatch --test-only` says against the job's options (nothing is submitted)."""
    with tempfile.TemporaryDirectory(prefix="ringflow-slurm-check-") as scratch:
        script = Path(scratch) / "check.sh"
        script.write_text("#!/bin/sh\ntrue\n")
        said = test_submit(str(script), [*sbatch_options(params, Path(scratch)), *params.slurm.sbatch_args])
    return f"sbatch --test-only refused the job: {said}" if said else None


def slurm_problem(params: Params, controller: str | None) -> str | None:
    """The first reason the job cannot be submitted, in one line (None: none found)."""
    if problem := unsupported(params):
        return problem
    missing = [tool for tool in NEEDED if shutil.which(tool) is None]
    if missing:
        return (f"train.scheduler slurm: {', '.join(missing)} not found on PATH (run on the cluster's head or login "
                f"node)")
    try:
        if problem := shape_problem(params):
            return problem
        if controller and not controller_spec(controller).rendezvous and not mpi_plugins():  # srun starts them
            return ("srun offers neither pmix nor pmi2 (srun --mpi=list), which Horovod's MPI ranks need: set "
                    "train.controller gloo, or ask the cluster's admin for Slurm's PMIx plugin")
        return refusal(params)
    except SlurmError as error:
        return str(error)
