"""The benchmarks' ringflow trainings as real ringflow runs: through the project's one step driver (tasks/steps.py's
run_steps with TRAINING_RUN, as the scaling flow's steps.scaling_train_step runs them), in a workspace of the
benchmark's own (never this checkout: its data/prepared, mlruns/ and outputs/ stay as they are). Each run is a child
process started in the workspace (tasks/paths.py reads RINGFLOW_WORKSPACE once, at import); its steady images/sec is
read back from the MLflow run, as the scaling report reads it.

Child side: python -m benchmarks.driver_runs {prepare,train} [--version JSON] [--overrides JSON]
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.paths import ROOT, Workspace

if TYPE_CHECKING:
    from tasks.params import Params
    from tasks.versioning.dvc import DataVersion

RESULT = "driver run: "  # the child's last word, one JSON line after it
FIRST_EPOCH = re.compile(r"<stdout>:epoch 1: ")


def workspace(folder: Path, data: dict[str, Any]) -> Path:
    """A workspace at `folder` as the tests make one (links to this checkout's code; benchmarks/ too: the runs start
    there) whose params.yaml names the data params `data` (DVC records the prepare stage from that file)."""
    import yaml

    from tests.helpers import make_workspace
    make_workspace(folder)
    (folder / "benchmarks").symlink_to(ROOT / "benchmarks")
    params_file = Workspace(folder).params_file
    raw = yaml.safe_load(params_file.read_text())
    params_file.write_text(yaml.safe_dump(raw | {"data": raw["data"] | data}, sort_keys=False))
    return folder


@functools.cache
def workspace_for(data_dir: Path, work: Path) -> tuple[Path, str]:
    """(the workspace, its data's DataVersion as JSON): the workspace whose data/prepared `data_dir` is, else a new
    one under `work` holding a copy of it and its manifest's data params; prepared and versioned by the driver's
    steps once (the conversion skipped when the data is up to date)."""
    from trainer.prepared_data import read_manifest
    root = data_dir.parents[1]
    if Workspace(root).prepared_dir != data_dir or not (root / "dvc.yaml").is_file():
        root = workspace(work / "workspace", read_manifest(data_dir)["params"])
        shutil.copytree(data_dir, Workspace(root).prepared_dir)
    return root, json.dumps(child(root, "prepare"))


def training_run(root: Path, version: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """One finished training run in the workspace `root` with the params.yaml `overrides`: its run_id, images_per_sec
    (steady, as the run records it) and first_epoch_seconds (its preflight's start to its first epoch line,
    open-run's own time left out; None without such a line)."""
    return child(root, "train", "--version", version, "--overrides", json.dumps(overrides))


def child(root: Path, *args: str) -> dict[str, Any]:
    """What `python -m benchmarks.driver_runs ARGS`, started in the workspace, said on its result line."""
    from tests.helpers import workspace_env
    done = subprocess.run([sys.executable, "-m", "benchmarks.driver_runs", *args], cwd=root,
                          env=workspace_env(root), capture_output=True, text=True)
    said = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not said:
        raise RuntimeError(f"driver run {args[0]} in {root} failed: {(done.stdout + done.stderr)[-3000:]}")
    return json.loads(said[-1].removeprefix(RESULT))


def versioned(params: Params) -> dict[str, Any]:
    """Child: the scaling flow's preparation: the prepare step (convert unless up to date, validate), then the
    version step (dvc.lock, the workspace's DVC remote); the DataVersion."""
    from tasks import steps
    from tasks.versioning.dvc_record import check_versionable
    check_versionable(params)
    steps.prepare_step(params, on_line=print)
    return dataclasses.asdict(steps.run_steps(steps.RunContext(params), [steps.VERSION]).data_version())


def trained(params: Params, version: DataVersion) -> dict[str, Any]:
    """Child: one finished training run through the driver (TRAINING_RUN, as steps.scaling_train_step runs it),
    each step timed; what training_run returns."""
    from tasks import steps
    from tasks.tracking import mlflow_store
    spans: dict[str, tuple[float, float]] = {}  # each step's (start, end)
    first_epoch: list[float] = []

    def timed(step: steps.RunStep[Any], run: steps.RunContext) -> Any:
        started = time.monotonic()
        try:
            return steps.run_directly(step, run)
        finally:
            spans[step.name] = (started, time.monotonic())

    def on_line(line: str) -> None:
        if not first_epoch and FIRST_EPOCH.search(line):
            first_epoch.append(time.monotonic())
        print(line, flush=True)  # shown when the run fails
    how = steps.RunHow(on_line=on_line, model_outputs=False)
    run = steps.run_steps(steps.RunContext(params, how, version=version), steps.TRAINING_RUN, timed)
    mlflow_store.end_run(run.run_id, ok=True)
    rate = mlflow_store.client().get_run(run.run_id).data.metrics["images_per_sec_steady"]
    opened, open_end = spans[steps.OPEN_RUN.name]
    first = first_epoch[0] - spans[steps.PREFLIGHT.name][0] - (open_end - opened) if first_epoch else None
    return {"run_id": run.run_id, "images_per_sec": rate, "first_epoch_seconds": first}


def main(argv: list[str] | None = None) -> int:
    """Child side, in the workspace: the params are its params.yaml with the overrides."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["prepare", "train"])
    parser.add_argument("--version", help="train: the DataVersion prepare gave (JSON)")
    parser.add_argument("--overrides", default="{}", help='params.yaml overrides (JSON: {"train.np": 2, ...})')
    args = parser.parse_args(argv)
    from tasks.params import load_params
    from tasks.tracking.server import use_tracking
    from tasks.versioning.dvc import DataVersion
    params = load_params(json.loads(args.overrides))
    use_tracking(params.tracking)
    if args.what == "prepare":
        result = versioned(params)
    else:
        result = trained(params, DataVersion(**json.loads(args.version)))
    print(RESULT + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    from trainer.process_end import end_now
    end_now(main())  # no teardown of TensorFlow after the result
