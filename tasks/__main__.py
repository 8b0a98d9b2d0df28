"""Command line for single steps, as dvc.yaml runs them:
python -m tasks {prepare,train,evaluate,export,register}.

Not DVC stages:
  version                        record the prepared data in dvc.lock and push it to the DVC remote
  restore --run-id ID            bring back data/prepared exactly as MLflow run ID used it
  restore --data-hash HASH       the same, by DVC hash
  compare [--last N] [--csv F]   the last N runs side by side (differing params, metrics, data hash), and as CSV
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tasks.errors import report
from tasks.params import Params, load_params, parse_assignments
from tasks.paths import OUTPUTS_DIR


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare", "version", "train", "evaluate", "export", "register", "restore",
                                         "compare"])
    parser.add_argument("--run-id", help="restore: the MLflow run whose data to bring back")
    parser.add_argument("--data-hash", help="restore: the DVC hash of the data to bring back")
    parser.add_argument("--last", type=int, default=5, help="compare: how many runs (newest first)")
    parser.add_argument("--csv", type=Path, default=OUTPUTS_DIR / "compare.csv", help="compare: CSV to write")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. train.epochs=3 or epochs=3)")
    return parser.parse_args(argv)


def stage(step: str, params: Params) -> str:
    """One dvc.yaml stage: it works on the run whose model is published (train opens a new run) and publishes what
    it made; `dvc repro` records dvc.lock after each stage."""
    from tasks import steps
    if step == "train":
        steps.preflight_step(params)
        run_id = steps.open_run_step(params)
        steps.train_step(params, run_id)
        steps.publish_step(params, run_id, ["model"], record=False)
        return f"mlflow run: {run_id}"
    run_id = steps.published_run_step()
    if step == "evaluate":
        metrics = steps.evaluate_step(run_id)
        steps.publish_step(params, run_id, ["metrics.json", "evaluation"], record=False)
        return str(metrics)
    if step == "export":
        savedmodel = steps.export_step(run_id)
        steps.publish_step(params, run_id, ["savedmodel"], record=False)
        return f"savedmodel: {savedmodel}"
    decision = steps.register_step(run_id, params)
    steps.publish_step(params, run_id, ["gate.json"], record=False)
    return decision.sentence()


def run_step(step: str, args: argparse.Namespace) -> None:
    """Run one step with the validated params and print its result."""
    params = load_params(parse_assignments(args.overrides))
    from tasks import steps
    if step == "prepare":
        print(steps.prepare_step(params))
    elif step == "version":
        print(f"data version: {steps.version_step().data_hash}")
    elif step in ("train", "evaluate", "export", "register"):
        print(stage(step, params))
    elif step == "restore":
        data_hash, target = steps.restore_step(args.run_id, args.data_hash)
        print(f"restored data version {data_hash} into {target}")
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
