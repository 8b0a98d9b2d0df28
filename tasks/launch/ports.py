"""Ports for a job's tf.distribute servers, picked on the host that will listen on them.

A port free on this machine says nothing about another host: each host is asked for its own, over ssh, all of a
host's ports at once (so they differ). A port can still be taken between the pick and the server's start; the
launcher then launches again with new ones (see `port_taken` in diagnosis).
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from tasks.launch.hosts import SSH_OPTIONS, is_local
from tasks.launch.preflight import PreflightError

# run by the Python of the host asked: `count` ports free on every address there, held together so that they differ
PICK_PORTS = ("import socket, sys\n"
              "held = [socket.socket() for _ in range(int(sys.argv[1]))]\n"
              "for sock in held: sock.bind(('', 0))\n"
              "print(*(sock.getsockname()[1] for sock in held))")


def free_ports_on(host: str, count: int) -> list[int]:
    """`count` different ports free on `host`, asked of the host itself (this machine: without ssh)."""
    pick = [sys.executable, "-c", PICK_PORTS, str(count)]
    command = pick if is_local(host) else ["ssh", *SSH_OPTIONS, host, shlex.join(pick)]
    try:
        answer = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise PreflightError(f"host {host} did not answer within 60 s (picking its ports)") from None
    ports = answer.stdout.split()
    if answer.returncode != 0 or len(ports) != count:
        why = (answer.stderr.strip().splitlines() or ["no message"])[-1]
        raise PreflightError(f"host {host}: could not pick {count} free ports there: {why}")
    return [int(port) for port in ports]


def pick_ports(hosts: list[str]) -> list[int]:
    """A free port for each entry of `hosts` (a host may repeat: its ports differ), every host asked at once."""
    wanted = Counter(hosts)
    if not wanted:
        return []
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        picked = dict(zip(wanted, pool.map(free_ports_on, wanted, wanted.values())))
    return [picked[host].pop() for host in hosts]
