"""Nothing of a job left running on the other hosts, whatever ended it."""
from __future__ import annotations

import re

from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.command import RemoteError, on_each_host, run_on


def stop_remote_processes(hosts: list[str], marker: str) -> None:
    """Kill, on every remote host at once, the processes whose command line holds `marker` (the job's configuration
    file): a rank whose ssh client was stopped is not stopped with it. A host that does not answer is passed over."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    kill = ["pkill", "-KILL", "-f", re.escape(marker)]

    def stop_on(host: str) -> None:
        try:
            run_on(host, kill, "stopping the job's processes", timeout=30, check=False)
        except RemoteError:  # a lost host: nothing more can be done from here
            pass
    on_each_host(remote, stop_on)
