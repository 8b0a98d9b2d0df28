"""Ports for a job's tf.distribute servers, picked on the host that will listen on them.

A port free on this machine says nothing about another host: each host is asked for its own, over ssh, all of a
host's ports at once (so they differ). A port can still be taken between the pick and the server's start; the
launcher then launches again with new ones (see `port_taken` in diagnosis).
"""
from __future__ import annotations

import sys
from collections import Counter

from tasks.launch.remote.command import RemoteError, on_each_host, run_on

# run by the Python of the host asked: `count` ports free on every address there, held together so that they differ
PICK_PORTS = ("import socket, sys\n"
              "held = [socket.socket() for _ in range(int(sys.argv[1]))]\n"
              "for sock in held: sock.bind(('', 0))\n"
              "print(*(sock.getsockname()[1] for sock in held))")


def free_ports_on(host: str, count: int) -> list[int]:
    """`count` different ports free on `host`, asked of the host itself (this machine: without ssh)."""
    answer = run_on(host, [sys.executable, "-c", PICK_PORTS, str(count)], f"picking {count} free ports", timeout=60)
    ports = answer.stdout.split()
    if len(ports) != count:
        raise RemoteError(f"host {host}: picking {count} free ports gave {len(ports)}")
    return [int(port) for port in ports]


def pick_ports(hosts: list[str]) -> list[int]:
    """A free port for each entry of `hosts` (a host may repeat: its ports differ), every host asked at once."""
    wanted = Counter(hosts)
    picked = on_each_host(list(wanted), lambda host: free_ports_on(host, wanted[host]))
    return [picked[host].pop() for host in hosts]
