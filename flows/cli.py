"""The flows' shared command line: `--set KEY=VALUE` overrides, checked before Prefect starts anything."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from tasks.launch.preflight import PreflightError, preflight_launch
from tasks.params import Params, ParamsError, load_params, parse_assignments


def with_np(params: Params, np: int) -> Params:
    """The same params at another process count."""
    return params.model_copy(update={"train": params.train.model_copy(update={"np": np})})


def checked_overrides(prog: str, description: str, argv: list[str] | None,
                      check: Callable[[Params], None], counts: Callable[[Params], list[int]] | None = None
                      ) -> dict[str, Any] | None:
    """Parsed overrides whose params pass `check` and the launch preflight (at each of `counts` process counts);
    None after printing one error line."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. train.epochs=3 or epochs=3)")
    args = parser.parse_args(argv)
    try:
        overrides = parse_assignments(args.overrides)
        params = load_params(overrides)
        check(params)
        for np in (counts(params) if counts else [params.train.np]):
            preflight_launch(with_np(params, np))
    except (ParamsError, PreflightError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None
    return overrides
