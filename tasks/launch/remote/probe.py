"""Preflight of the hosts of a launch other than this machine: ssh without a password, the same Python and trainer
code as here, Horovod built, enough slots, the network interface asked for. One ssh call per host, all at once; a
problem is one line naming the host (preflight raises it)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tasks.launch.remote import host_probe
from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.command import RemoteError, failure, last_line, on_each_host, run_on
from tasks.paths import ROOT

PROBE_SECONDS = 120
HostAnswer = dict | str  # the probe's answers, or the host's problem in one line


def probe(host: str, data_dir: Path, token_file: Path) -> HostAnswer:
    """The host's answers to host_probe.py, run by this checkout's Python path there, or the problem."""
    argv = [sys.executable, "-", str(ROOT), str(data_dir), str(token_file)]
    try:
        answer = run_on(host, argv, "the preflight probe", PROBE_SECONDS, input=Path(host_probe.__file__).read_text(),
                        check=False)
    except RemoteError as error:
        return str(error)
    if answer.returncode == 127:
        return f"host {host} has no Python at {sys.executable}: {last_line(answer.stderr)}"
    if answer.returncode != 0:
        return str(failure(host, "the preflight probe", answer.returncode, answer.stderr))
    return json.loads(answer.stdout.strip().splitlines()[-1])


def host_problem(host: str, slots: int, answer: dict, horovod: bool) -> str | None:
    """What keeps `host` from running `slots` ranks, in one line; None when nothing does."""
    here = sys.version.split()[0]
    if answer["python"] != here:
        return f"host {host} runs Python {answer['python']} at {sys.executable}, this machine {here}"
    if answer["trainer"] != host_probe.trainer_digest(ROOT):
        where = "is missing" if not answer["trainer"] else "differs from this machine's"
        return f"host {host}: ringflow's trainer at {ROOT} {where}"
    if horovod and "error" in answer["horovod"]:
        return f"host {host}: Horovod cannot be imported there ({answer['horovod']['error']})"
    capacity, unit = (answer["gpus"], "GPUs") if answer["gpus"] else (answer["cores"], "cores")
    if slots > capacity:
        return f"host {host} has {capacity} {unit} for the {slots} slots asked (train.hosts / train.hostfile)"
    return None


def probe_remote_hosts(hosts: list[str], data_dir: Path, token_file: Path) -> dict[str, HostAnswer]:
    """Every host that is not this machine, probed at once: its answers, or its problem in one line."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    return on_each_host(remote, lambda host: probe(host, data_dir, token_file))


def remote_host_problem(slots_by_host: dict[str, int], horovod: bool, answers: dict[str, HostAnswer]) -> str | None:
    """The first problem of the probed hosts, in one line."""
    for host, answer in answers.items():
        problem = answer if isinstance(answer, str) else host_problem(host, slots_by_host[host], answer, horovod)
        if problem:
            return problem
    return None


def interface_problem(interface: str | None, hosts: list[str], answers: dict[str, HostAnswer]) -> str | None:
    """train.network_interface missing on a host of the job (this machine included), in one line."""
    if interface is None:
        return None
    for host in dict.fromkeys(hosts):
        answer = answers.get(host)
        names = answer["interfaces"] if isinstance(answer, dict) else host_probe.interface_names()
        if interface not in names:
            return (f"train.network_interface: host {host} has no interface {interface} "
                    f"(it has {', '.join(names)})")
    return None
