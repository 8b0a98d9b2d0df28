"""Horovod's elastic host discovery: a script Horovod runs about once a second, whose `host:slots` lines are the hosts
training may use now. The generated one lists the hosts of train.hosts / train.hostfile that answer ssh (this
machine always): a host that goes down leaves the job, and joins again once it answers."""
from __future__ import annotations

import shlex
from pathlib import Path

from tasks.launch.remote.addresses import is_local
from tasks.paths import resolve_path
from trainer.config import ElasticParams, TrainParams

DISCOVERY_SCRIPT_NAME = "discover_hosts.sh"
# a host that does not answer in 2 s is gone; one that answered and then went silent (its link lost mid-probe) is
# given up within 2 s of silence, and no probe lasts beyond PROBE_SECONDS whatever happens: Horovod's elastic driver
# waits for this script, and one probe that hung (seen: 13 minutes) stopped the whole job
PROBE_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-o", "ServerAliveInterval=1",
                 "-o", "ServerAliveCountMax=2"]
PROBE_SECONDS = 5


def discovery_script_text(slots_by_host: dict[str, int]) -> str:
    """A POSIX shell script printing `host:slots` for each host that is this machine or answers ssh now."""
    lines = ["#!/bin/sh", "# ringflow: the hosts that answer now, as host:slots (Horovod elastic host discovery)",
             f"answers() {{ timeout -k 1 {PROBE_SECONDS} ssh " + shlex.join(PROBE_OPTIONS)
             + ' "$1" true </dev/null >/dev/null 2>&1; }']
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


