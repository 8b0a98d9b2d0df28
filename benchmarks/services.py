"""The embedded SQLite store vs the team's MLflow server on PostgreSQL (`make services`), side by side in one run.

T1: the per-epoch logging cost: one epoch's metrics (8 values, one log_batch, as rank 0 sends them) into a run, in
    milliseconds, into mlruns/mlflow.db and through the server.
T2: the pipeline's wall time (`python -m flows.pipeline`, np 1, a few epochs), alternating between the two stores.
T3: 4 pipelines at once, all tracked in one store: one SQLite file (its lock taken by one writer at a time) vs the
    server; the wall time until the last one ends, and how many failed.

Usage: .venv/bin/python -m benchmarks.services [--epochs 3] [--repeats 2] [--calls 200]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tasks.paths import ROOT

BIN = ROOT / ".venv" / "bin"
READY_LINE = "stop: Ctrl-C here, or make services-down"


@contextmanager
def services() -> Iterator[dict[str, str]]:
    """scripts/services.sh up on ports of its own, with its data in a temporary folder; the client variables."""
    home = Path(tempfile.mkdtemp(prefix="ringflow-bench-services-", dir="/tmp"))
    home.chmod(0o711)
    env = dict(os.environ, SERVICES_HOME=str(home), MLFLOW_PORT="15500", PREFECT_PORT="15420",
               POSTGRES_PORT="15433", PREFECT_HOME=str(home / "prefect-home"))
    log = home / "up.log"
    process = subprocess.Popen(["bash", "scripts/services.sh", "up"], cwd=ROOT, env=env, stdout=open(log, "w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while READY_LINE not in log.read_text():
            if process.poll() is not None:
                raise RuntimeError(log.read_text()[-2000:])
            time.sleep(1)
        client = dict(line.removeprefix("export ").split("=", 1) for line in (home / "client.env").read_text()
                      .splitlines())
        yield client
    finally:
        subprocess.run(["bash", "scripts/services.sh", "down"], cwd=ROOT, env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def logging_cost(uri: str, calls: int) -> float:
    """Median milliseconds of one epoch's log_batch into a fresh run of `uri`."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("bench") or client.get_experiment(client.create_experiment("bench"))
    run_id = client.create_run(experiment.experiment_id).info.run_id
    keys = ("loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec", "learning_rate", "epoch_seconds", "lr")
    times = []
    for step in range(calls):
        stamp = int(time.time() * 1000)
        started = time.perf_counter()
        client.log_batch(run_id, metrics=[Metric(key, 0.5, stamp, step) for key in keys])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def workspace(folder: Path) -> Path:
    """A clone of this checkout's commit, sharing its .venv: one user's checkout."""
    subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(folder)], check=True)
    (folder / ".venv").symlink_to(ROOT / ".venv")
    return folder


def pipeline(folder: Path, tracking: dict[str, str], epochs: int) -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **tracking)
    env.pop("RINGFLOW_WORKSPACE", None)
    return subprocess.Popen([str(BIN / "python"), "-m", "flows.pipeline", "--set=train.np=1",
                             f"--set=train.epochs={epochs}"], cwd=folder, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def pipelines_at_once(base: Path, tracking: dict[str, str], count: int, epochs: int) -> tuple[float, int]:
    """(seconds until the last of `count` pipelines ends, how many failed)."""
    folders = [workspace(base / f"p{index}") for index in range(count)]
    started = time.monotonic()
    processes = [pipeline(folder, tracking, epochs) for folder in folders]
    failed = sum(process.wait() != 0 for process in processes)
    return time.monotonic() - started, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--at-once", type=int, default=4)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ringflow-bench-"))
    with services() as client:
        stores = {"sqlite": {"MLFLOW_TRACKING_URI": f"sqlite:///{base / 'shared.db'}"}, "server": client}
        for name, tracking in stores.items():
            print(f"T1 {name}: {logging_cost(tracking['MLFLOW_TRACKING_URI'], args.calls):.1f} ms per epoch's log")
        for repeat in range(args.repeats):
            for name, tracking in stores.items():
                folder = workspace(base / f"t2-{name}-{repeat}")
                started = time.monotonic()
                code = pipeline(folder, tracking, args.epochs).wait()
                print(f"T2 {name}: pipeline {time.monotonic() - started:.1f} s (exit {code})")
        for name, tracking in stores.items():
            seconds, failed = pipelines_at_once(base / f"t3-{name}", tracking, args.at_once, args.epochs)
            print(f"T3 {name}: {args.at_once} pipelines at once {seconds:.1f} s, {failed} failed")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
