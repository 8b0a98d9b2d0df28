"""One way to say a line: `[component] text` on the stream a process's entry point gives, at the level --quiet and
--verbose ask for."""
from __future__ import annotations

import io
import logging
from typing import Iterator

import pytest

from tasks import logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    ringflow = logging.getLogger(logs.ROOT_LOGGER)
    before = (list(ringflow.handlers), ringflow.level, ringflow.propagate)
    said = io.StringIO()
    yield said
    ringflow.handlers[:], ringflow.level, ringflow.propagate = before


@pytest.mark.parametrize(("quiet", "verbose", "lines"), [
    (False, False, ["[services] mlflow started", "[serve-model] no champion yet"]),
    (True, False, ["[serve-model] no champion yet"]),
    (False, True, ["[services] asking PostgreSQL", "[services] mlflow started", "[serve-model] no champion yet"]),
])
def test_every_component_says_its_lines_in_one_format_at_the_level_asked(
        stream: io.StringIO, quiet: bool, verbose: bool, lines: list[str]) -> None:
    logs.setup(logs.level_of(quiet=quiet, verbose=verbose), stream)
    logs.logger("services").debug("asking PostgreSQL")
    logs.logger("services").info("mlflow started")
    logs.logger("serve-model").warning("no champion yet")
    assert stream.getvalue().splitlines() == lines


def test_a_second_set_up_replaces_the_first(stream: io.StringIO) -> None:
    logs.setup(logging.INFO, io.StringIO())
    logs.setup(logging.INFO, stream)
    logs.logger("services").info("once")
    assert stream.getvalue() == "[services] once\n"
