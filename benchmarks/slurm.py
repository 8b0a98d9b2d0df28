"""Slurm benchmark on the test cluster's Slurm (scripts/testcluster.sh up 2 --slurm, root), side by side in one run.

S1: the same Horovod training, np=2 with one rank on each of h1 and h2, started through Slurm (a batch job: srun
    over PMIx with MPI, horovodrun in the allocation with Gloo) vs through ssh (horovodrun -H h1:1,h2:1), steady
    images/sec: what the scheduler's way of starting ranks costs once they run (it should cost nothing).
S2: wall time from the training run's start to its first epoch line, for both, its preflight included (Slurm asked
    with sinfo and sbatch --test-only, or the hosts probed over ssh), the opening of its MLflow run left out: the
    submission, the scheduling and the start of the job's steps vs horovodrun's ssh starts.
Each training is a real ringflow run: the step driver's preflight, open-run and train (tasks/steps.py's TRAINING_RUN)
in a workspace of the benchmark's own, its steady images/sec as its MLflow run records it (benchmarks/driver_runs.py).

Usage: .venv/bin/python -m benchmarks.slurm [--images 19600] [--epochs 3] [--repeats 2]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.cluster import cluster_with_data

WAYS = {"slurm": {"scheduler": "slurm"}, "ssh": {"hosts": "h1:1,h2:1"}}


def timed_training(data: Path, work: Path, way: str, controller: str, args: argparse.Namespace) -> tuple[float, float]:
    """(steady images/sec, seconds from the run's preflight to its first epoch line) of one training run."""
    from benchmarks.driver_runs import training_run, workspace_for
    root, version = workspace_for(data, work)
    overrides = {"train.np": 2, "train.epochs": args.epochs, "train.warmup_epochs": 0, "train.tensorboard": False,
                 "train.batch_size": args.batch_size, "train.controller": controller,
                 **{f"train.{key}": value for key, value in WAYS[way].items()}, "slurm.nodes": 2,
                 "slurm.tasks_per_node": 1}
    run = training_run(root, version, overrides)
    if run["first_epoch_seconds"] is None:
        raise RuntimeError(f"run {run['run_id']} ({way}, {controller}): no epoch 1 line")
    return float(run["images_per_sec"]), float(run["first_epoch_seconds"])


def measure(data: Path, work: Path, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """Both ways alternating, for each controller, `repeats` times."""
    results: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for controller in ("mpi", "gloo"):
            for way in WAYS:
                results.setdefault(f"{controller}, {way}", []).append(
                    timed_training(data, work, way, controller, args))
    return results


def report(results: dict[str, list[tuple[float, float]]], args: argparse.Namespace) -> None:
    print(f"S1 cnn, {args.images:,} 28x28 images, batch {args.batch_size}/rank, np=2 on h1 and h2, {args.epochs} "
          f"epochs (steady epochs)")
    for controller in ("mpi", "gloo"):
        slurm, ssh = results[f"{controller}, slurm"], results[f"{controller}, ssh"]
        pairs = ", ".join(f"{s[0]:,.0f} vs {o[0]:,.0f}" for s, o in zip(slurm, ssh))
        ratio = np.median([s[0] for s in slurm]) / np.median([o[0] for o in ssh])
        print(f"   {controller}: through Slurm vs through ssh img/s: {pairs}; ratio {ratio:.2f}")
    print("S2 the train step's start to its first epoch line")
    for controller in ("mpi", "gloo"):
        slurm, ssh = results[f"{controller}, slurm"], results[f"{controller}, ssh"]
        pairs = ", ".join(f"{s[1]:.1f} s vs {o[1]:.1f} s" for s, o in zip(slurm, ssh))
        ratio = np.median([s[1] for s in slurm]) / np.median([o[1] for o in ssh])
        print(f"   {controller}: through Slurm vs through ssh: {pairs}; ratio {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=19_600)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with cluster_with_data(args.images, "--slurm") as (prepared, work):
        results = measure(prepared, work, args)
    report(results, args)


if __name__ == "__main__":
    main()
