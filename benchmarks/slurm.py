"""Slurm benchmark on the test cluster's Slurm (scripts/testcluster.sh up 2 --slurm, root), side by side in one run.

S1: the same Horovod training, np=2 with one rank on each of h1 and h2, started through Slurm (a batch job: srun
    over PMIx with MPI, horovodrun in the allocation with Gloo) vs through ssh (horovodrun -H h1:1,h2:1), steady
    images/sec: what the scheduler's way of starting ranks costs once they run (it should cost nothing).
S2: wall time from the train step's start to its first epoch line, for both, its preflight included (Slurm asked
    with sinfo and sbatch --test-only, or the hosts probed over ssh): the submission, the scheduling and the start
    of the job's steps vs horovodrun's ssh starts.

Usage: .venv/bin/python -m benchmarks.slurm [--images 19600] [--epochs 3] [--repeats 2]
"""
from __future__ import annotations

import argparse
import re
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.cluster import cluster_with_data

WAYS = {"slurm": {"scheduler": "slurm"}, "ssh": {"hosts": "h1:1,h2:1"}}


def timed_training(data: Path, work: Path, way: str, controller: str, args: argparse.Namespace) -> tuple[float, float]:
    """(steady images/sec, seconds from the train step's start to its first epoch line) of one training."""
    from tasks.launch.job import train
    from tasks.params import Params, SlurmParams, TrainParams
    from tasks.tracking.run_log import steady_images_per_sec
    params = Params(train=TrainParams(np=2, epochs=args.epochs, warmup_epochs=0, tensorboard=False,
                                      batch_size=args.batch_size, controller=controller, **WAYS[way]),
                    slurm=SlurmParams(nodes=2, tasks_per_node=1))
    shutil.rmtree(work / "checkpoints", ignore_errors=True)  # every measurement trains from scratch
    first_epoch: list[float] = []
    started = time.monotonic()

    def on_line(line: str) -> None:
        if not first_epoch and re.search(r"<stdout>:epoch 1: ", line):
            first_epoch.append(time.monotonic() - started)
    result = train(params, data, work / f"{way}-{controller}", work / "checkpoints", None, on_line)
    return steady_images_per_sec(result.summary), first_epoch[0]


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
