"""Command line for single steps, as dvc.yaml runs them: python -m tasks {prepare,version,train,evaluate,export}.

`version` (not a DVC stage: it runs DVC) records the prepared data in dvc.lock and pushes it to the remote.
"""
from __future__ import annotations

import argparse
import sys

from tasks.params import ParamsError, load_params, parse_assignments


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks", description=__doc__)
    parser.add_argument("step", choices=["prepare", "version", "train", "evaluate", "export"])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. train.epochs=3 or epochs=3)")
    return parser.parse_args(argv)


def run_step(step: str, overrides: dict[str, str]) -> None:
    """Run one step with the validated params and print its result."""
    params = load_params(overrides)
    from tasks import steps
    if step == "prepare":
        print(steps.prepare_step(params))
    elif step == "version":
        from tasks.version import version_data
        print(f"data version: {version_data().data_hash}")
    elif step == "train":
        print(f"mlflow run: {steps.train_step(params)}")
    elif step == "evaluate":
        print(steps.evaluate_step(steps.model_run_id()))
    else:
        print(f"savedmodel: {steps.export_step(steps.model_run_id())}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run_step(args.step, parse_assignments(args.overrides))
    except ParamsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
