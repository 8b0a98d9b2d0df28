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

from tasks.launch.preflight import PreflightError
from tasks.params import ParamsError, load_params, parse_assignments
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


def run_step(step: str, args: argparse.Namespace) -> None:
    """Run one step with the validated params and print its result."""
    params = load_params(parse_assignments(args.overrides))
    from tasks import steps
    if step == "prepare":
        print(steps.prepare_step(params))
    elif step == "version":
        print(f"data version: {steps.version_step().data_hash}")
    elif step == "train":
        print(f"mlflow run: {steps.train_step(params)}")
    elif step == "evaluate":
        print(steps.evaluate_step(steps.model_run_id()))
    elif step == "export":
        print(f"savedmodel: {steps.export_step(steps.model_run_id())}")
    elif step == "register":
        print(steps.register_step(steps.model_run_id(), params).sentence())
    elif step == "restore":
        data_hash, target = steps.restore_step(args.run_id, args.data_hash)
        print(f"restored data version {data_hash} into {target}")
    else:
        print(steps.compare_step(params, args.last, args.csv))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run_step(args.step, args)
    except (ParamsError, PreflightError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
