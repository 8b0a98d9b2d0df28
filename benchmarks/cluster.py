"""Cluster benchmark on the test cluster (scripts/testcluster.sh, root), measured side by side in one run.

C1: the same Horovod training, np=2 with one rank on each of h1 and h2 vs np=2 on this machine, steady images/sec,
    for Gloo and MPI: the cost of the network path between hosts (here veth pairs on a bridge, not a real network).
C2: wall time from `prefect deployment run training-pipeline/train` (through `make serve`'s server and worker) to
    the first epoch logged in MLflow, training across h1 and h2 vs on this machine (preflight over ssh, shipping
    and the remote start included).

The hosts share this machine's filesystem (`up 2`), or not (`--private`: the data is shipped before the launch).

Usage: .venv/bin/python -m benchmarks.cluster [--images 19600] [--epochs 3] [--repeats 2] [--private]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from benchmarks.data_pipeline import generated_images
from benchmarks.training import ringflow_rate
from tasks.paths import ROOT

SCRIPT = ROOT / "scripts" / "testcluster.sh"
BIN = ROOT / ".venv" / "bin"
HOSTS = "h1:1,h2:1"


@contextmanager
def cluster_with_data(images: int, *up_options: str) -> Iterator[tuple[Path, Path]]:
    """The test cluster up (`up 2` with the options) and `images` generated images prepared in a scratch folder:
    (the prepared data, the scratch folder); the cluster down afterwards, whatever happened."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    subprocess.run(["bash", SCRIPT, "down"], check=True)
    subprocess.run(["bash", SCRIPT, "up", "2", *up_options], check=True, stdout=subprocess.DEVNULL)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            pixels, labels = generated_images(images)
            np.savez(work / "data.npz", x=pixels, y=labels)
            prepare(DataParams(dataset=f"npz:{work / 'data.npz'}", val_fraction=0.01, test_fraction=0.01),
                    work / "prepared", progress=False)
            yield work / "prepared", work
    finally:
        subprocess.run(["bash", SCRIPT, "down"], check=True)


def throughput(data: Path, work: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    """C1: steady images/sec, cluster and one host alternating, for each controller."""
    rates: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for controller in ("gloo", "mpi"):
            for where, hosts in (("two hosts", HOSTS), ("one host", None)):
                rate = ringflow_rate(data, work, args.epochs, 2, batch_size=args.batch_size, hosts=hosts,
                                     controller=controller)
                rates.setdefault(f"{controller}, {where}", []).append(rate)
    return rates


def serve(repo: Path, port: int) -> subprocess.Popen:
    """`make serve`'s script in the checkout copy; returns once the worker is up."""
    env = dict(os.environ, PREFECT_PORT=str(port), PREFECT_HOME=str(repo / ".prefect"))
    env.pop("PREFECT_API_URL", None)
    served = subprocess.Popen(["bash", "scripts/serve.sh"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    for _ in range(480):
        try:
            body = json.dumps({}).encode()
            request = urllib.request.Request(f"{api}/work_pools/ringflow-local/workers/filter", data=body,
                                             headers={"Content-Type": "application/json"})
            if any(w["status"] == "ONLINE" for w in json.load(urllib.request.urlopen(request, timeout=5))):
                return served
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("make serve did not start a worker")


def first_epoch_seconds(repo: Path, api: str, hosts: str | None) -> float:
    """Seconds from `prefect deployment run` to the run's first epoch in MLflow (the deployment watched to its
    end)."""
    from mlflow.tracking import MlflowClient
    overrides = json.dumps({"train.epochs": 1, **({"train.hosts": hosts} if hosts else {})})
    env = dict(os.environ, PREFECT_API_URL=api)
    started = time.time()
    done = subprocess.run([str(BIN / "prefect"), "deployment", "run", "training-pipeline/train", "--param",
                           f"overrides={overrides}", "--watch"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ringflow")
    (run,) = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)
    (first,) = [m for m in client.get_metric_history(run.info.run_id, "accuracy") if m.step == 0]
    return first.timestamp / 1000 - started


def time_to_first_epoch(args: argparse.Namespace) -> dict[str, list[float]]:
    """C2, in a copy of this checkout served by `make serve`'s script."""
    from tests.helpers import copy_checkout, free_port
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = copy_checkout(Path(tmp))
        port = free_port()
        served = serve(repo, port)
        api = f"http://127.0.0.1:{port}/api"
        try:
            first_epoch_seconds(repo, api, None)  # prepares and versions the data: not measured
            for _ in range(args.repeats):
                for where, hosts in (("two hosts", HOSTS), ("one host", None)):
                    times.setdefault(where, []).append(first_epoch_seconds(repo, api, hosts))
        finally:
            os.killpg(served.pid, signal.SIGTERM)
            served.wait(timeout=120)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=19_600)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--private", action="store_true", help="hosts without the shared filesystem")
    args = parser.parse_args()
    with cluster_with_data(args.images, *(["--private"] if args.private else [])) as (prepared, work):
        rates = throughput(prepared, work, args)
        times = time_to_first_epoch(args)
    report(rates, times, args)


def report(rates: dict[str, list[float]], times: dict[str, list[float]], args: argparse.Namespace) -> None:
    fs = "hosts with their own disks (data shipped)" if args.private else "shared filesystem"
    print(f"C1 cnn, {args.images:,} 28x28 images, batch {args.batch_size}/rank, np=2, {args.epochs} epochs "
          f"(steady epochs), {fs}")
    for controller in ("gloo", "mpi"):
        cluster, local = rates[f"{controller}, two hosts"], rates[f"{controller}, one host"]
        pairs = ", ".join(f"{c:,.0f} vs {o:,.0f}" for c, o in zip(cluster, local))
        print(f"   {controller}: two hosts vs one host img/s: {pairs}; "
              f"ratio {np.median(cluster) / np.median(local):.2f}")
    print("C2 `prefect deployment run` to the first epoch in MLflow, 1 epoch of digits, np=2")
    for where, values in times.items():
        print(f"   {where}: " + ", ".join(f"{value:.1f} s" for value in values))
    print(f"   two hosts / one host: {np.median(times['two hosts']) / np.median(times['one host']):.2f}")


if __name__ == "__main__":
    main()
