"""Trials share the slots: each takes np of them on as few hosts as it can, waits while they are taken, and a sweep
that could never run is one line."""
from __future__ import annotations

import threading

import pytest

from tasks.params import ParamsError
from tasks.sweep.slots import SlotPool, hosts_text


def test_a_trial_takes_its_slots_on_as_few_hosts_as_it_can_and_gives_them_back() -> None:
    pool = SlotPool({"h1": 2, "h2": 2})
    first, second = pool.take(2), pool.take(2)
    assert sorted([hosts_text(first), hosts_text(second)]) == ["h1:2", "h2:2"]
    pool.give(first)
    assert pool.take(1) == {next(iter(first)): 1} and hosts_text({"h1": 1, "h2": 1}) == "h1:1,h2:1"


def test_a_trial_waits_until_its_slots_are_free() -> None:
    pool = SlotPool({"localhost": 2})
    held = pool.take(2)
    got: list[dict[str, int]] = []
    waiting = threading.Thread(target=lambda: got.append(pool.take(1)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and not got
    pool.give(held)
    waiting.join(5)
    assert got == [{"localhost": 1}]


def test_a_sweep_that_could_never_run_is_one_line() -> None:
    with pytest.raises(ParamsError, match="^bad sweep: a trial of train.np 3 needs more slots than the 2 there are$"):
        SlotPool({"h1": 1, "h2": 1}).check(3)


@pytest.mark.parametrize(("count", "parallel", "at_once"), [(1, 2, 2), (1, 3, 2), (2, 2, 1), (2, 1, 1)])
def test_no_more_trials_run_at_once_than_the_slots_hold(count: int, parallel: int, at_once: int) -> None:
    assert SlotPool({"h1": 1, "h2": 1}).at_once(count, parallel) == at_once
