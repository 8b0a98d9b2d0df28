"""How `make test` spreads the suite over pytest-xdist's workers: a module's tests stay on one worker (its module
fixtures are made once, not once per worker), and every module that uses the test cluster (its network namespaces,
/etc/hosts and ~/.ssh/config, its Slurm: one per machine) is in one group, run one module after another. The
longest groups are handed out first, so the last to end is a short one.

(xdist's own `--dist loadgroup` marks a group in the test's node id, which pytest 9 no longer lets a plugin change:
the groups are made here, from the node ids, by a scheduler of xdist's `loadscope` kind.)"""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MACHINE_WIDE_GROUP = "the test cluster"
USES_THE_TEST_CLUSTER = "from tests.tasks.launch.cluster_hosts import"


@cache
def group_of_module(module: str) -> str:
    """A module's group: the machine-wide one when it uses the test cluster, else its own path."""
    source = (ROOT / module).read_text() if (ROOT / module).is_file() else ""
    return MACHINE_WIDE_GROUP if USES_THE_TEST_CLUSTER in source else module


def group_of(nodeid: str) -> str:
    return group_of_module(nodeid.split("::", 1)[0])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The machine-wide group first, then the modules of system tests, most tests first, then the rest (each
    worker collects alike, so each has this order)."""
    slow_tests: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            slow_tests[group_of(item.nodeid)] = slow_tests.get(group_of(item.nodeid), 0) + 1

    def start_order(item: pytest.Item) -> tuple[int, int]:
        group = group_of(item.nodeid)
        return (0 if group == MACHINE_WIDE_GROUP else 1 if group in slow_tests else 2), -slow_tests.get(group, 0)
    items.sort(key=start_order)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Groups as above, handed out in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)
