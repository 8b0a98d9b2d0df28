"""Horovod's elastic mode on the launch side: the host-discovery script and horovodrun's elastic arguments.

Horovod runs the discovery script about once a second; its `host:slots` lines are the hosts training may use now.
The generated script lists the hosts of train.hosts / train.hostfile that answer ssh (this machine always): a host
that goes down leaves the job, and joins again once it answers (after the cooldown, if its rank had failed).
"""
from __future__ import annotations

import shlex
from pathlib import Path

from tasks.launch.hosts import head_address, is_local
from tasks.paths import resolve_path
from trainer.config import ElasticParams, TrainParams

DISCOVERY_SCRIPT_NAME = "discover_hosts.sh"
PROBE_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=2"]  # a host that does not answer in 2 s is gone


def discovery_script_text(slots_by_host: dict[str, int]) -> str:
    """A POSIX shell script printing `host:slots` for each host that is this machine or answers ssh now."""
    lines = ["#!/bin/sh", "# ringflow: the hosts that answer now, as host:slots (Horovod elastic host discovery)",
             "answers() { ssh " + shlex.join(PROBE_OPTIONS) + ' "$1" true </dev/null >/dev/null 2>&1; }']
    for host, slots in slots_by_host.items():
        entry = shlex.quote(f"{host}:{slots}")
        lines.append(f"echo {entry}" if is_local(host) else f"answers {shlex.quote(host)} && echo {entry}")
    return "\n".join(lines + ["exit 0", ""])


def write_discovery_script(slots_by_host: dict[str, int], directory: Path) -> Path:
    """A generated discovery script, executable, in `directory`."""
    path = directory / DISCOVERY_SCRIPT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(discovery_script_text(slots_by_host))
    tmp.chmod(0o755)
    tmp.replace(path)
    return path


def discovery_script(elastic: ElasticParams, job_dir: Path) -> Path:
    """Where the job's discovery script is: the user's own (train.elastic.discovery_script) or the generated one."""
    return resolve_path(elastic.discovery_script) if elastic.discovery_script else job_dir / DISCOVERY_SCRIPT_NAME


def prepare_discovery(train: TrainParams, slots_by_host: dict[str, int], job_dir: Path) -> None:
    """Write an elastic job's discovery script into its directory, unless the user named their own."""
    if train.elastic and not train.elastic.discovery_script:
        write_discovery_script(slots_by_host, job_dir)


def elastic_arguments(elastic: ElasticParams, script: Path) -> list[str]:
    """horovodrun's elastic options: the size range, the discovery script, the cooldown of a failed host."""
    low, high = elastic.cooldown_seconds
    return ["--min-np", str(elastic.min_np), "--max-np", str(elastic.max_np), "--host-discovery-script",
            str(script), "--blacklist-cooldown-range", str(low), str(high)]


def interface_of(address: str) -> str | None:
    """The name of this machine's interface holding `address`."""
    import psutil
    return next((name for name, addresses in psutil.net_if_addrs().items()
                 if any(entry.address == address for entry in addresses)), None)


def elastic_interface(train: TrainParams, slots_by_host: dict[str, int]) -> str | None:
    """The ranks' interface in elastic mode: train.network_interface, else Horovod's own choice, which needs two
    hosts at the start; with one host, this machine's interface towards it (`lo` for this machine itself)."""
    if train.network_interface or len(slots_by_host) > 1:
        return train.network_interface
    host = next(iter(slots_by_host))
    return "lo" if is_local(host) else interface_of(head_address([host]))


def elastic_problem(train: TrainParams, unshared_hosts: tuple[str, ...]) -> str | None:
    """What keeps this job from training elastically, in one line; None when nothing does."""
    elastic = train.elastic
    if elastic is None:
        return None
    if train.backend != "horovod":
        return f"train.elastic needs backend horovod (Keras fit in Horovod's elastic loop), not {train.backend}"
    if train.controller == "mpi":
        return "train.elastic needs the Gloo controller (Horovod's elastic mode has no MPI): set train.controller " \
               "to auto or gloo"
    if unshared_hosts:
        return (f"train.elastic needs a filesystem every host shares (rank 0, which saves, may move to any host): "
                f"host {unshared_hosts[0]} does not see this checkout")
    script = resolve_path(elastic.discovery_script) if elastic.discovery_script else None
    if script and not (script.is_file() and script.stat().st_mode & 0o111):
        return f"train.elastic.discovery_script {script} is not an executable file"
    return None
