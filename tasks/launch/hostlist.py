"""The hosts of a launch and their slots, from train.hosts ('h1:4,h2:2') or train.hostfile ('host slots=N' lines)."""
from __future__ import annotations

import re

from tasks.launch.errors import PreflightError
from tasks.paths import resolve_path
from trainer.config import TrainParams


def parse_hosts(hosts: str) -> dict[str, int]:
    """'h1:4,h2:2' -> {'h1': 4, 'h2': 2} (a host without ':N' has 1 slot)."""
    slots: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in hosts.split(","))):
        name, _, count = item.partition(":")
        if count and not count.isdigit():
            raise PreflightError(f"bad hosts entry {item!r}: expected host or host:slots")
        slots[name] = slots.get(name, 0) + int(count or 1)
    return slots


SLOTS_WORD = re.compile(r"\s*\bslots\s*=\s*")  # 'host slots=N', 'host\tslots = N': as horovodrun reads them


def read_hostfile(path: str) -> dict[str, int]:
    """A horovodrun hostfile: 'host slots=N' (or 'host:N') per line; a relative path is the workspace's (where
    params.yaml is), whatever the caller's directory. Read once here: horovodrun gets the hosts as `-H`."""
    file = resolve_path(path)
    if not file.is_file():
        raise PreflightError(f"hostfile {file} does not exist")
    lines = [line.split("#")[0].strip() for line in file.read_text().splitlines()]
    entries = [SLOTS_WORD.sub(":", line) for line in lines if line]
    return parse_hosts(",".join(entries))


def host_slots(train: TrainParams) -> dict[str, int]:
    """The hosts a launch uses and their slots (localhost with np slots by default)."""
    if train.hostfile:
        return read_hostfile(train.hostfile)
    if train.hosts:
        return parse_hosts(train.hosts)
    return {"localhost": train.np}


def listed(train: TrainParams) -> bool:
    """Whether the hosts were named (train.hosts or train.hostfile) rather than this machine by default."""
    return bool(train.hosts or train.hostfile)


def rank_hosts(train: TrainParams) -> tuple[str, ...]:
    """The host of each rank, in rank order (horovodrun fills each host's slots in turn); elastic: of every rank
    there may be."""
    count = train.elastic.max_np if train.elastic else train.np
    return tuple(host for host, slots in host_slots(train).items() for _ in range(slots))[:count]
