"""The test clusters (scripts/testcluster.sh) for tests: hosts h1 and h2 (with Slurm when asked), or g1 and g2 beside
them (RINGFLOW_TESTCLUSTER=g), shared or private filesystems, and what runs on them. A module that uses a cluster
imports this module; `TEST_CLUSTER = "g"` in it puts it on cluster g (tests/parallel.py runs the modules of each
cluster one after another, the two clusters side by side)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "testcluster.sh"
STATE = Path("/run/ringflow-testcluster")  # cluster h's
STATES = {"h": STATE, "g": Path("/run/ringflow-testcluster-g"), "f": Path("/run/ringflow-testcluster-f")}
SUBNETS = {"h": "10.77.0", "g": "10.77.1", "f": "10.77.2"}


def hosts_of(cluster: str, count: int = 2) -> list[str]:
    """A cluster's host names."""
    return [f"{cluster}{index}" for index in range(1, count + 1)]


def ranks_on(host: str) -> list[int]:
    """The training processes (ranks, workers, servers) running in a test-cluster host's network namespace."""
    pids = subprocess.run(["ip", "netns", "pids", f"rf-{host}"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in pids if b"-m\0trainer" in command_line(int(pid))]


def command_line(pid: int) -> bytes:
    """A process's command line; empty when it has just ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def cluster_state(cluster: str = "h") -> tuple[list[str], str]:
    """A test cluster's namespaces and the processes started from its state directory, as the system lists them."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    namespaces = [line.split()[0] for line in listed if line.startswith(f"rf-{cluster}")]
    daemons = subprocess.run(["pgrep", "-af", f"{STATES[cluster]}/"], capture_output=True, text=True).stdout
    return namespaces, daemons


def script_env(cluster: str) -> dict[str, str]:
    return {**os.environ, "RINGFLOW_TESTCLUSTER": cluster}


def cluster_up(*options: str, cluster: str = "h") -> Iterator[list[str]]:
    """`up 2` (with options) of a cluster, the hosts' names, and afterwards `down` with nothing left behind."""
    env = script_env(cluster)
    subprocess.run(["bash", SCRIPT, "down"], check=True, env=env)  # what an interrupted run may have left
    up = subprocess.run(["bash", SCRIPT, "up", "2", *options], capture_output=True, text=True, env=env)
    assert up.returncode == 0, up.stderr
    yield up.stdout.split()
    subprocess.run(["bash", SCRIPT, "down"], check=True, env=env)
    namespaces, daemons = cluster_state(cluster)
    assert not namespaces and not daemons  # nothing left behind


def on_host(host: str, *command: str, input: str | None = None) -> subprocess.CompletedProcess:
    """A command run on a test-cluster host over ssh (its input: `input`, else none)."""
    return subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host, *command], input=input,
                          stdin=None if input is not None else subprocess.DEVNULL, capture_output=True, text=True)


def set_link(host: str, state: str) -> None:
    """A host's only network link down, as a pulled cable would, or up again with its default route (which went
    with the link), and back only once the host answers ssh again: in one fresh-clone run the next test's first ssh,
    right after the link came up, still got `No route to host` (this machine had given up resolving the host's
    address while the link was down)."""
    namespace = ["ip", "-n", f"rf-{host}"]
    subprocess.run([*namespace, "link", "set", "eth0", state], check=True)
    if state == "up":
        subprocess.run([*namespace, "route", "replace", "default", "via", f"{SUBNETS[host[0]]}.1"], check=True)
        wait_for_ssh(host)


def wait_for_ssh(host: str, seconds: float = 60) -> None:
    """A bounded wait (not a speed goal) for a host to answer ssh."""
    deadline = time.monotonic() + seconds
    while (answer := on_host(host, "true")).returncode != 0:
        assert time.monotonic() < deadline, f"{host} does not answer ssh {seconds:.0f} s after its link came up: " \
                                            f"{answer.stderr.strip()}"
        time.sleep(0.5)
