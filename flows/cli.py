"""The flows' shared command line: `--set KEY=VALUE` overrides, checked before Prefect starts anything."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Callable, TypeVar

from tasks.launch.preflight import PreflightError, check_settings
from tasks.params import Params, ParamsError, load_params, parse_assignments
from tasks.tracking.server import use_tracking

T = TypeVar("T")


def with_np(params: Params, np: int) -> Params:
    """The same params at another process count (under Slurm: whole nodes of slurm.tasks_per_node ranks, or one
    node of fewer)."""
    at_np = params.model_copy(update={"train": params.train.model_copy(update={"np": np})})
    if params.train.scheduler != "slurm":
        return at_np
    per_node = min(params.slurm.tasks_per_node, np)
    if np % per_node:
        raise ParamsError(f"np {np} is not a whole number of nodes of slurm.tasks_per_node {per_node}")
    shape = {"nodes": np // per_node, "tasks_per_node": per_node}
    return at_np.model_copy(update={"slurm": params.slurm.model_copy(update=shape)})


def checked_overrides(prog: str, description: str, argv: list[str] | None,
                      check: Callable[[Params], None], counts: Callable[[Params], list[int]] | None = None,
                      resolve_hosts: bool = True) -> dict[str, Any] | None:
    """Parsed overrides whose params pass `check` and the launch checks that need no data and no other host (at
    each of `counts` process counts); None after printing one error line. The hosts are probed once, later, by the
    run's preflight (a dry run does not even resolve their names: resolve_hosts False)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. train.epochs=3 or epochs=3)")
    args = parser.parse_args(argv)
    try:
        overrides = parse_assignments(args.overrides)
        params = load_params(overrides)
        use_tracking(params.tracking)
        check(params)
        for np in (counts(params) if counts else [params.train.np]):
            check_settings(with_np(params, np), resolve=resolve_hosts)
    except (ParamsError, PreflightError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None
    return overrides


def stop_temporary_server() -> None:
    """Without PREFECT_API_URL, Prefect runs a temporary server that says goodbye when the process exits; stop it
    before ringflow prints its result, so that ringflow's own line is the last one."""
    if "prefect.server.api.server" not in sys.modules:
        return
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer
    APILogWorker.drain_all(timeout=5)  # the flow's last log lines reach the server before it stops
    for server in list(SubprocessASGIServer._instances.values()):
        server.stop()


def run_flow(call: Callable[[], T]) -> tuple[T | None, int]:
    """A flow run from the command line: (its result, 0), or (None, the exit code) after the one `error:` line
    (2 for bad input, 1 otherwise; Ctrl-C too); the temporary server stopped either way."""
    from tasks.errors import report, report_interrupt
    try:
        result = call()
    except Exception as error:  # every failure ends in one line
        stop_temporary_server()
        return None, report(error)
    except KeyboardInterrupt:
        stop_temporary_server()
        return None, report_interrupt()
    stop_temporary_server()
    return result, 0


class BadInputTracebacks(logging.Filter):
    """Prefect logs a task's exception with its traceback; for bad input the one sentence says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        from tasks.errors import is_bad_input
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and is_bad_input(error):
            record.exc_info, record.exc_text = None, None
        return True


def shorten_bad_input_logs() -> None:
    """Install BadInputTracebacks on the handlers Prefect set up (its console handler on the root logger, its API
    handlers on the `prefect.*` loggers), once."""
    loggers = [logging.getLogger()] + [logger for name, logger in logging.root.manager.loggerDict.items()
                                       if name.startswith("prefect") and isinstance(logger, logging.Logger)]
    for handler in {handler for logger in loggers for handler in logger.handlers}:
        if not any(isinstance(f, BadInputTracebacks) for f in handler.filters):
            handler.addFilter(BadInputTracebacks())
