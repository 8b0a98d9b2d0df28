"""The slots a sweep's trials share: those of train.hosts (or hostfile), or this machine's cores. A trial takes np
slots, on as few hosts as it can, and gives them back when it ends; one that would wait forever (np above every
slot there is) is refused before anything starts, and no more trials run at once than the slots hold."""
from __future__ import annotations

import threading

from tasks.params import ParamsError


class SlotPool:
    """Free slots by host; take() blocks until a trial's slots are free."""

    def __init__(self, slots: dict[str, int]) -> None:
        self._free = dict(slots)
        self._total = sum(slots.values())
        self._changed = threading.Condition()

    def check(self, count: int) -> None:
        """One line when a trial of `count` ranks can never run."""
        if count > self._total:
            raise ParamsError(f"bad sweep: a trial of train.np {count} needs more slots than the {self._total} "
                              "there are")

    def at_once(self, count: int, parallel: int) -> int:
        """How many trials of `count` ranks run at once: `parallel`, or as many as the slots hold."""
        return max(1, min(parallel, self._total // count))

    def _placed(self, count: int) -> dict[str, int] | None:
        """`count` slots from the hosts with the most free first (a trial spread over few hosts); None if fewer."""
        if sum(self._free.values()) < count:
            return None
        placed: dict[str, int] = {}
        for host in sorted(self._free, key=lambda name: -self._free[name]):
            taken = min(self._free[host], count - sum(placed.values()))
            if taken:
                placed[host] = taken
        return placed

    def take(self, count: int) -> dict[str, int]:
        """Wait for `count` free slots and take them: {host: slots}."""
        with self._changed:
            while (placed := self._placed(count)) is None:
                self._changed.wait()
            for host, taken in placed.items():
                self._free[host] -= taken
            return placed

    def give(self, placed: dict[str, int]) -> None:
        """Give a trial's slots back."""
        with self._changed:
            for host, taken in placed.items():
                self._free[host] += taken
            self._changed.notify_all()


def hosts_text(placed: dict[str, int]) -> str:
    """Slots as train.hosts says them: `h1:2,h2:1`."""
    return ",".join(f"{host}:{count}" for host, count in placed.items())
