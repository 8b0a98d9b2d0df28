"""The fixed cost of a run: what `make run` takes beyond its epochs, side by side in one run.

O1: `make run` (the defaults of params.yaml) in a clone of this checkout, after a first `make run` that prepared the
    data and started what it keeps: wall time minus the sum of its epochs' `epoch_time`. Goal <= 6 s. The run's own
    last line says where the time went, step by step: the median of each step is printed.
O2 (--baseline REV): the same in a clone of REV, the two clones taking turns (A B A B ...); the ratio of their fixed
    costs, run by run. The clones share this checkout's .venv, whose set-up record each set-up script would take
    for another's (and install again): the pipeline is timed as `make run` starts it, and this clone's set-up
    check, timed apart, is added to its figures.

Usage: .venv/bin/python -m benchmarks.overhead [--runs 3] [--baseline REV]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tasks.paths import ROOT

RUN_ID = re.compile(r"^mlflow run id:\s+(\w+)$", re.M)
TIME_LINE = re.compile(r"^time: .*$", re.M)
GOAL_SECONDS = 6.0


def clone(folder: Path, revision: str = "HEAD") -> Path:
    """A clone of this checkout at `revision`, sharing its .venv: one user's checkout."""
    subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(folder)], check=True)
    subprocess.run(["git", "checkout", "-q", revision], cwd=folder, check=True)
    (folder / ".venv").symlink_to(ROOT / ".venv")
    return folder


def timed(command: list[str], folder: Path) -> tuple[float, str]:
    """(seconds, what it printed) of a command in the clone, in the environment `make` gives it; it fails loudly."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("RINGFLOW_WORKSPACE", "PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    env |= {"TF_CPP_MIN_LOG_LEVEL": "2", "PREFECT_HOME": str(folder / ".prefect"), "MLFLOW_DISABLE_TELEMETRY": "true",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    started = time.monotonic()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} in {folder} failed: {(done.stdout + done.stderr)[-2000:]}")
    return seconds, done.stdout + done.stderr


def make_run(folder: Path) -> tuple[float, str]:
    """`make run`'s pipeline (`ringflow run` finds the project, then runs this module: milliseconds; the command
    is the shared .venv's, whose code is the checkout that installed it, so each clone's is started directly)."""
    return timed([str(folder / ".venv" / "bin" / "python"), "-m", "flows.pipeline"], folder)


def setup_check(folder: Path) -> float:
    """Seconds of the set-up `make run` starts with, everything in place (the second of two)."""
    timed(["bash", "scripts/setup.sh", "run"], folder)
    return timed(["bash", "scripts/setup.sh", "run"], folder)[0]


def epoch_seconds(folder: Path, printed: str) -> float:
    """The sum of the run's epoch times, from its trained model's summary."""
    run_id = RUN_ID.search(printed)[1]  # type: ignore[index]
    summary = json.loads((folder / "outputs" / "runs" / run_id / "model" / "train_summary.json").read_text())
    return sum(summary["history"]["epoch_time"])


def measured(folder: Path) -> tuple[float, dict[str, float]]:
    """One `make run`: (its fixed cost, its steps' seconds outside the epochs as its last line gives them)."""
    seconds, printed = make_run(folder)
    line = TIME_LINE.search(printed)
    outside = re.sub(r" \(.*?\)", "", line[0].split("outside them: ", 1)[1]) if line else ""
    epochs = epoch_seconds(folder, printed)
    steps = {"wall": seconds, "epochs": epochs}  # what the fixed cost is the difference of: epochs may absorb work
    steps |= {name: float(value) for name, value in (part.rsplit(" ", 1) for part in outside.split(", ") if part)}
    parts = re.search(r"train [\d.]+ \((.*?)\)", line[0]) if line else None
    steps |= {f"  {name}": float(value) for name, value in (p.rsplit(" ", 1) for p in parts[1].split(", "))} \
        if parts else {}
    return seconds - epochs, steps


def report(name: str, costs: list[float], steps: list[dict[str, float]]) -> None:
    print(f"{name}: fixed cost median {statistics.median(costs):.1f} s (min {min(costs):.1f}, max {max(costs):.1f}) "
          f"over {len(costs)} runs; goal <= {GOAL_SECONDS:g} s")
    if steps and steps[0]:
        print("   by step (median s): " + ", ".join(f"{step} {statistics.median(s[step] for s in steps):.1f}"
                                                  for step in steps[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", help="a git revision to compare with (its clone takes turns with this one)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ringflow-bench-overhead-"))
    clones = {"O1 this checkout": clone(base / "this")}
    if args.baseline:
        clones[f"O2 {args.baseline}"] = clone(base / "baseline", args.baseline)
    try:
        check = setup_check(clones["O1 this checkout"])
        for folder in clones.values():
            make_run(folder)  # the data prepared, the local server started (where there is one)
        results: dict[str, list[tuple[float, dict[str, float]]]] = {name: [] for name in clones}
        for _ in range(args.runs):
            for name, folder in clones.items():
                cost, steps = measured(folder)
                results[name].append((cost + check, steps) if folder == clones["O1 this checkout"] else (cost, steps))
        print(f"set-up check of this checkout: {check:.1f} s (in O1's figures)")
        for name, runs in results.items():
            report(name, [cost for cost, _ in runs], [steps for _, steps in runs])
        if args.baseline:
            this, before = (results[name] for name in clones)
            ratios = [a[0] / b[0] for a, b in zip(this, before)]
            print(f"fixed cost, this / {args.baseline} (without its set-up check): "
                  f"median {statistics.median(ratios):.2f} "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    finally:
        for folder in clones.values():
            subprocess.run(["make", "-s", "stop"], cwd=folder, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
