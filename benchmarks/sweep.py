"""A sweep's packing vs the same trainings one after another, side by side in one run.

S1: `make sweep` of N trials (random, `sweep.parallel` 2, np 1, no pruning) in a fresh clone of this checkout: its
    wall time. From its trials' table, each trial's overhead: its wall time minus its training time (the sum of
    its epochs' `epoch_time`).
S2: the same N trainings (each trial's values, np 1, the same epochs) through `make run`, one after another, in
    another fresh clone: their total wall time. The goal: S1 at most 0.6 of S2.

Usage: .venv/bin/python -m benchmarks.sweep [--trials 8] [--epochs 3]
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.services import workspace

SPACE = {"train.learning_rate": {"low": 0.0005, "high": 0.005, "log": True}, "train.batch_size": [16, 32, 64]}


def make(folder: Path, target: str, settings: list[str]) -> float:
    """Seconds of `make TARGET ARGS=...` in a checkout, as a user types it (it fails loudly)."""
    env = dict(os.environ)
    for name in ("RINGFLOW_WORKSPACE", "PREFECT_API_URL", "MLFLOW_TRACKING_URI"):
        env.pop(name, None)
    arguments = " ".join(f"--set='{setting}'" for setting in settings)
    started = time.monotonic()
    done = subprocess.run(["make", target, f"ARGS={arguments}"], cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"make {target} failed: {(done.stdout + done.stderr)[-2000:]}")
    return time.monotonic() - started


def sweep_trials(folder: Path) -> list[dict[str, str]]:
    """The sweep's trials table (its parent run's trials.csv) with each trial's training seconds."""
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ringflow").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`ringflow.kind` = 'sweep'")
    with tempfile.TemporaryDirectory() as target:
        table = Path(client.download_artifacts(parent.info.run_id, "trials.csv", target)).read_text()
    rows = list(csv.DictReader(io.StringIO(table)))
    for row in rows:
        epochs = client.get_metric_history(row["run_id"], "epoch_time")
        row["training_seconds"] = str(sum(epoch.value for epoch in epochs))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ringflow-bench-sweep-"))
    common = ["train.np=1", f"train.epochs={args.epochs}"]
    swept = make(workspace(base / "sweep"), "sweep", [*common, "sweep.method=random", f"sweep.trials={args.trials}",
                                                      "sweep.parallel=2", "sweep.pruner=none",
                                                      f"sweep.space={json.dumps(SPACE)}"])
    trials = sweep_trials(base / "sweep")
    overheads = [float(row["seconds"]) - float(row["training_seconds"]) for row in trials]
    print(f"S1 make sweep, {args.trials} trials, 2 at once: {swept:.1f} s")
    print(f"   per trial: wall {statistics.median(float(row['seconds']) for row in trials):.1f} s, training "
          f"{statistics.median(float(row['training_seconds']) for row in trials):.1f} s, overhead median "
          f"{statistics.median(overheads):.1f} s (min {min(overheads):.1f}, max {max(overheads):.1f})")
    sequential = workspace(base / "sequential")
    runs = [make(sequential, "run", [*common, f"train.learning_rate={row['train.learning_rate']}",
                                     f"train.batch_size={row['train.batch_size']}"]) for row in trials]
    print(f"S2 make run x {len(runs)}, one after another: {sum(runs):.1f} s (each {statistics.median(runs):.1f} s "
          f"median)")
    print(f"sweep / sequential: {swept / sum(runs):.2f} (goal <= 0.6)")
    for folder in (base / "sweep", sequential):  # the local Prefect server each clone's runs started and left
        subprocess.run(["make", "-s", "stop"], cwd=folder, capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
