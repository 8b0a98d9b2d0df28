"""The flows' shared command line: `--set KEY=VALUE` overrides, checked before Prefect starts anything."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Callable, TypeVar

from tasks.launch.launchers.choose import scheduler_for
from tasks.launch.preflight import PreflightError, check_settings
from tasks.params import Params, ParamsError, load_params, parse_assignments
from tasks.tracking.server import use_tracking

T = TypeVar("T")


def with_np(params: Params, np: int) -> Params:
    """The same params at another process count (a scheduler's job: the shape its scheduler gives np ranks)."""
    if scheduler := scheduler_for(params):
        return scheduler.at_np(params, np)
    return params.model_copy(update={"train": params.train.model_copy(update={"np": np})})


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


def use_local_server() -> None:
    """With no Prefect API configured (PREFECT_API_URL, or a Prefect profile's), use the checkout's local server,
    starting it when none runs (servers/local_prefect.py); say where it is."""
    from prefect.context import refresh_global_settings_context
    from prefect.settings import get_current_settings

    from servers.local_prefect import ensure_server
    if get_current_settings().api.url:
        return
    note, started = ensure_server()
    os.environ["PREFECT_API_URL"] = note.api_url
    refresh_global_settings_context()
    print(f"Prefect server: {note.ui_url} ({'started; ' if started else ''}`make stop` stops it)", flush=True)


# Prefect's services that send what is queued when the process ends, each logging under its class's name: a
# "Still processing items" warning from them would come after the run's last line (seen after a Ctrl-C)
DRAINED_AT_EXIT = ("EventsWorker", "APILogWorker")


def run_flow(call: Callable[[], T]) -> tuple[T | None, int]:
    """A flow run from the command line, on the configured Prefect API or the local server: (its result, 0), or
    (None, the exit code) after the one `error:` line (2 for bad input, 1 otherwise, 130 for Ctrl-C: whatever the
    run's processes made of the interrupt, once it was pressed). Prefect's draining at exit says only errors."""
    from tasks.errors import report, report_interrupt
    from tasks.interrupt import catch_interrupts, interrupted
    catch_interrupts()
    try:
        use_local_server()
        result = call()
    except Exception as error:  # every failure ends in one line
        return None, report_interrupt() if interrupted() else report(error)
    except KeyboardInterrupt:
        return None, report_interrupt()
    finally:
        for name in DRAINED_AT_EXIT:
            logging.getLogger(name).setLevel(logging.ERROR)
    return (None, report_interrupt()) if interrupted() else (result, 0)


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
