"""Command line for single steps, as dvc.yaml runs them:
python -m tasks {prepare,train,evaluate,export,register}.

Not DVC stages:
  version                        record the prepared data in dvc.lock and push it to the DVC remote
  restore --run-id ID            bring back data/prepared exactly as MLflow run ID used it
  restore --data-hash HASH       the same, by DVC hash
  compare [--last N] [--csv F]   the last N runs side by side (differing params, metrics, data hash), and as CSV
  copy-runs --to URI [--from URI]  every run and model version of a store (the embedded one) into another (a team's
                                 server), each once: running it again copies nothing twice
  ui-link                        the address of the experiment's training runs in MLflow's UI (make ui prints it)
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from tasks import steps
from tasks.data.data_lock import DataHolder, prepared_data_lock
from tasks.errors import report
from tasks.outputs.publish import published_run
from tasks.params import Params, load_params, parse_assignments
from tasks.paths import OUTPUTS_DIR
from tasks.tracking import run_log
from tasks.tracking.run_labels import RunSource
from tasks.tracking.server import use_tracking

RUN_STEP_NAMES = [step.name for step in steps.RUN_STEPS]
STAGE_SOURCE = RunSource("dvc repro (python -m tasks train)")  # a stage's run, in MLflow's Source column


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare", "version", *RUN_STEP_NAMES, "restore", "compare", "copy-runs",
                                           "ui-link"])
    parser.add_argument("--run-id", help="restore: the MLflow run whose data to bring back")
    parser.add_argument("--data-hash", help="restore: the DVC hash of the data to bring back")
    parser.add_argument("--last", type=int, default=5, help="compare: how many runs (newest first)")
    parser.add_argument("--csv", type=Path, default=OUTPUTS_DIR / "compare.csv", help="compare: CSV to write")
    parser.add_argument("--to", dest="copy_to", help="copy-runs: the tracking server (or store) to copy into")
    parser.add_argument("--from", dest="copy_from", help="copy-runs: the store to copy (the embedded one)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. train.epochs=3 or epochs=3)")
    return parser.parse_args(argv)


def stage(step: str, params: Params, holder: DataHolder | None = None) -> str:
    """One dvc.yaml stage: it works on the run whose model is published (train opens a new run) and publishes what
    it made; `dvc repro` records dvc.lock after each stage."""
    run = steps.RunContext(params, steps.RunHow(steps.RunLabels(STAGE_SOURCE), holder=holder, stage=step))
    if step != steps.TRAIN.name:
        run = replace(run, run_id=published_run(steps.TRAIN.publishes[0]))  # the model published now
    run = steps.run_steps(run, steps.stage_steps(step))
    return said(run, step)


def said(run: steps.RunContext, step: str) -> str:
    """What a stage prints: the run a training opened, else what its step gave."""
    return f"mlflow run: {run.run_id}" if step == steps.TRAIN.name else steps.step_named(step).shown(run)


def run_step(step: str, args: argparse.Namespace) -> None:
    """Run one step with the validated params and print its result."""
    params = load_params(parse_assignments(args.overrides))
    use_tracking(params.tracking)
    if step == "prepare":
        print(steps.prepare_step(params))
    elif step == "version":
        print(f"data version: {steps.version_step().data_hash}")
    elif step in RUN_STEP_NAMES:
        with prepared_data_lock(False, f"the {step} stage") as holder:  # no prepare or restore while it reads it
            print(stage(step, params, holder))
    elif step == "restore":
        data_hash, target = steps.restore_step(args.run_id, args.data_hash)
        print(f"restored data version {data_hash} into {target}")
    elif step == "copy-runs":
        print(steps.copy_runs_step(args.copy_from, args.copy_to))
    elif step == "ui-link":
        print(f"MLflow UI, ringflow's training runs: {run_log.runs_link(params)}")
    else:
        print(steps.compare_step(params, args.last, args.csv))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run_step(args.step, args)
    except Exception as error:  # every failure ends in one line; exit 2 for bad input, 1 otherwise
        return report(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
