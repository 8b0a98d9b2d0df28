"""Nothing of a job left running on any host, whatever ended it: every process whose command line holds the job's
marker (its configuration file, which every rank and server names) is killed, on this machine and on every host
a rank ran on. This also finds the ranks that outlived their launcher (horovodrun or mpirun killed, say by the
OOM killer: their children are re-parented and no longer in the launcher's tree)."""
from __future__ import annotations

import os
import re

import psutil

from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.command import RemoteError, on_each_host, run_on
from tasks.launch.supervise.watch import kill_all


def local_job_processes(marker: str) -> list[psutil.Process]:
    """The processes of this machine (this one aside) whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command_line = " ".join(process.info["cmdline"] or [])
        if marker in command_line and process.pid != os.getpid():
            found.append(process)
    return found


def stop_local_processes(marker: str, grace_seconds: float = 5) -> None:
    """Kill this machine's processes of the job (psutil checks each is still the process it found: a PID reused
    since is never signalled)."""
    kill_all(local_job_processes(marker), grace_seconds)


def stop_remote_processes(hosts: list[str], marker: str) -> None:
    """Kill, on every remote host at once, the processes whose command line holds `marker`: a rank whose ssh client
    was stopped is not stopped with it. A host that does not answer is passed over."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    kill = ["pkill", "-KILL", "-f", re.escape(marker)]

    def stop_on(host: str) -> None:
        try:
            run_on(host, kill, "stopping the job's processes", timeout=30, check=False)
        except RemoteError:  # a lost host: nothing more can be done from here
            pass
    on_each_host(remote, stop_on)


def stop_job_processes(hosts: list[str], marker: str) -> None:
    """The job's processes gone from this machine and from every host a rank ran on."""
    stop_local_processes(marker)
    stop_remote_processes(hosts, marker)
