"""How `make test` spreads the suite over pytest-xdist's workers: a module's tests stay on one worker (its module
fixtures are made once, not once per worker), and every module that uses a test cluster (its network namespaces and
its hosts' names; cluster h's Slurm: one per machine) is in that cluster's group, run one module after another: h's
(the default) and g's (`TEST_CLUSTER = "g"` in the module) run side by side. The longest groups are handed out
first, so the last to end is a short one. Modules that share a session fixture too costly to make twice (the
session's pipeline run) name one group (`TEST_GROUP = "..."` in the module): each worker makes its own session
fixtures, so they run on one worker and it is made once.

(xdist's own `--dist loadgroup` marks a group in the test's node id, which pytest 9 no longer lets a plugin change:
the groups are made here, from the node ids, by a scheduler of xdist's `loadscope` kind.)"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_GROUP = "the test cluster "  # and the cluster's letter
USES_A_TEST_CLUSTER = "from tests.tasks.launch.cluster_hosts import"
ON_CLUSTER = re.compile(r'^TEST_CLUSTER = "([a-z])"', re.MULTILINE)
IN_GROUP = re.compile(r'^TEST_GROUP = "([^"]+)"', re.MULTILINE)


@cache
def group_of_module(module: str) -> str:
    """A module's group: its test cluster's when it uses one, else the group it names, else its own path."""
    source = (ROOT / module).read_text() if (ROOT / module).is_file() else ""
    if USES_A_TEST_CLUSTER not in source:
        return found.group(1) if (found := IN_GROUP.search(source)) else module
    return CLUSTER_GROUP + (found.group(1) if (found := ON_CLUSTER.search(source)) else "h")


def group_of(nodeid: str) -> str:
    return group_of_module(nodeid.split("::", 1)[0])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The clusters' groups first, then the modules of system tests, most tests first, then the rest (each worker
    collects alike, so each has this order)."""
    slow_tests: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            slow_tests[group_of(item.nodeid)] = slow_tests.get(group_of(item.nodeid), 0) + 1

    def start_order(item: pytest.Item) -> tuple[int, int]:
        group = group_of(item.nodeid)
        return (0 if group.startswith(CLUSTER_GROUP) else 1 if group in slow_tests else 2), -slow_tests.get(group, 0)
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
