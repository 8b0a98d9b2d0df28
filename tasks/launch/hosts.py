"""Preflight of the hosts of a launch other than this machine: ssh without a password, the same Python and trainer
code as here, Horovod built, enough slots. One ssh call per host, all at once; a problem is one line naming the host
(preflight raises it).
"""
from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tasks.launch import host_probe
from tasks.paths import ROOT

SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]  # never a password prompt


def local_addresses() -> set[str]:
    """Every IPv4 address of this machine's interfaces."""
    import psutil
    return {address.address for addresses in psutil.net_if_addrs().values() for address in addresses
            if address.family == socket.AF_INET}


def is_local(host: str) -> bool:
    """Whether `host` is this machine (by name or by one of its addresses)."""
    if host in ("localhost", "127.0.0.1") or host == socket.gethostname():
        return True
    try:
        return socket.gethostbyname(host) in local_addresses()
    except OSError:
        return False


def head_address(hosts: list[str]) -> str:
    """This machine's address as the remote hosts reach it (the source address of its route to the first of them);
    'localhost' when every host is this machine."""
    remote = [host for host in hosts if not is_local(host)]
    if not remote:
        return "localhost"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        probe_socket.connect((socket.gethostbyname(remote[0]), 9))  # no packet is sent: only the route is chosen
        return probe_socket.getsockname()[0]


def probe(host: str, data_dir: Path) -> dict | str:
    """The host's answers to tasks/launch/host_probe.py, run by this checkout's Python path there, or the problem."""
    command = ["ssh", *SSH_OPTIONS, host, sys.executable, "-", shlex.quote(str(ROOT)), shlex.quote(str(data_dir))]
    try:
        answer = subprocess.run(command, input=Path(host_probe.__file__).read_text(), capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        return f"host {host} did not answer the preflight probe over ssh within 120 s"
    why = (answer.stderr.strip().splitlines() or ["no message"])[-1]
    if answer.returncode == 255:
        return f"host {host} cannot be reached by ssh without a password: {why}"
    if answer.returncode == 127:
        return f"host {host} has no Python at {sys.executable}: {why}"
    if answer.returncode != 0:
        return f"host {host}: the preflight probe failed (exit {answer.returncode}): {why}"
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


def probe_remote_hosts(hosts: list[str], data_dir: Path) -> dict[str, dict | str]:
    """Every host that is not this machine, probed at once: its answers, or its problem in one line."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    if not remote:
        return {}
    with ThreadPoolExecutor(max_workers=len(remote)) as pool:
        return dict(zip(remote, pool.map(probe, remote, [data_dir] * len(remote))))


def remote_host_problem(slots_by_host: dict[str, int], horovod: bool, answers: dict[str, dict | str]) -> str | None:
    """The first problem of the probed hosts, in one line."""
    for host, answer in answers.items():
        problem = answer if isinstance(answer, str) else host_problem(host, slots_by_host[host], answer, horovod)
        if problem:
            return problem
    return None


def stop_remote_processes(hosts: list[str], marker: str) -> None:
    """Kill, on every remote host, the processes whose command line holds `marker` (the job's configuration file):
    a rank whose ssh client was stopped is not stopped with it."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    pattern = re.escape(marker)
    stoppers = [subprocess.Popen(["ssh", *SSH_OPTIONS, host, "pkill", "-KILL", "-f", shlex.quote(pattern)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for host in remote]
    for stopper in stoppers:
        try:
            stopper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stopper.kill()
