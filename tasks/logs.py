"""How ringflow's processes say a line to the person who runs them: the standard `logging` module, under the
`ringflow` logger, in one format, `[component] text` (`[services] mlflow started`). Each process's entry point calls
`setup` once; `--quiet` keeps warnings and errors, `--verbose` adds debug lines (`level_of`); tests read the lines
with pytest's caplog, or from the stream they give `setup`. What a process prints for another to parse (a rank's
protocol lines, a command's result) is output, not a log line: it stays on stdout."""
from __future__ import annotations

import logging
import sys
from typing import TextIO

ROOT_LOGGER = "ringflow"


class ComponentFormat(logging.Formatter):
    """`[component] text`: the component is the logger's name under `ringflow`."""

    def format(self, record: logging.LogRecord) -> str:
        component = record.name.removeprefix(f"{ROOT_LOGGER}.")
        text = super().format(record)
        return f"[{component}] {text}"


def logger(component: str) -> logging.Logger:
    """The logger a component says its lines with (`services`, `serve-model`, ...)."""
    return logging.getLogger(f"{ROOT_LOGGER}.{component}")


def level_of(quiet: bool = False, verbose: bool = False) -> int:
    """The level `--quiet` and `--verbose` ask for (neither: info)."""
    return logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO


def setup(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Every `ringflow` line to `stream` (stderr when None) at `level` and above, each flushed as it is said; set
    again, it replaces the earlier set-up."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(ComponentFormat())
    root = logging.getLogger(ROOT_LOGGER)
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
