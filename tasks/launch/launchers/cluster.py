"""Cluster backends: one process per TF_CONFIG task (multiworker: the workers; parameter-server: parameter servers
and workers, as tf.distribute servers, plus the coordinator), started here or over ssh on their hosts."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tasks.launch.hostlist import host_slots, listed
from tasks.launch.launchers.base import Launcher, trainer_command
from tasks.launch.remote.addresses import head_address, is_local
from tasks.launch.remote.command import ssh_command
from tasks.launch.slurm.commands import SRUN
from tasks.launch.supervise.processes import Process
from tasks.params import Params
from tasks.paths import ROOT
from trainer.backend_specs import backend_spec
from trainer.protocol import HEARTBEAT_ENV, METRICS_SPOOL_ENV
from trainer.slurm_cluster import PORTS_DIR_ENV

PS_SERVER = [sys.executable, "-m", "trainer.backends.ps_server"]
# ssh passes almost none of the environment: what a process started on another host needs, named (on its command
# line, so nothing secret: no rank needs a tracking setting, see tasks/launch/environment.py)
FORWARDED_OVER_SSH = ("TF_CONFIG", METRICS_SPOOL_ENV, "PYTHONPATH", "PYTHONUNBUFFERED",
                      "TF_CPP_MIN_LOG_LEVEL", HEARTBEAT_ENV)
UNPICKED_PORT = "<port>"  # a dry run's placeholder: ports are picked on their hosts at launch
Placement = dict[str, list[str]]  # task type -> the host of each task


def head_of(hosts: list[str]) -> str:
    """Where the hosts reach the processes started on this machine (a placeholder when a host does not resolve,
    which only a dry run gets this far with)."""
    try:
        return head_address(hosts)
    except OSError:
        return "<this machine>"


def cluster_placement(params: Params) -> Placement:
    """The host of each tf.distribute task: workers fill the listed hosts' slots in turn, then this machine;
    parameter-server's servers, coordinator and tf.data dispatcher run on this machine."""
    train = params.train
    hosts = host_slots(train) if listed(train) else {}
    head = head_of(list(hosts))
    names = [host for host, slots in hosts.items() for _ in range(slots)]
    placed = {"worker": (names + [head] * max(0, train.np - len(names)))[:train.np]}
    if backend_spec(train.backend).with_servers:  # the tf.data service's dispatcher runs in the coordinator
        placed |= {"ps": [head] * train.num_ps, "chief": [head], "data_dispatcher": [head]}
    return placed


def cluster_addresses(params: Params, ports: list[int] | None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The tf.distribute cluster (task type: host:port of each task) and, for parameter-server, the tf.data
    dispatcher's address; `ports` in port_hosts' order (None: placeholders)."""
    placed = cluster_placement(params)
    given = iter(ports) if ports is not None else None
    cluster = {task: [f"{host}:{next(given) if given else UNPICKED_PORT}" for host in task_hosts]
               for task, task_hosts in placed.items()}
    extra = {"data_dispatcher": cluster.pop("data_dispatcher")[0]} if "data_dispatcher" in cluster else {}
    return cluster, extra


def _process(host_port: str, command: list[str], env: dict[str, str], label: str, waited: bool) -> Process:
    """A local process, or one started over ssh on its host (same checkout path there)."""
    host = host_port.rsplit(":", 1)[0]
    if is_local(host):
        return Process(command, env, label, waited, (host,))
    forwarded = " ".join(f"{key}={shlex.quote(env[key])}" for key in FORWARDED_OVER_SSH if key in env)
    remote = f"cd {shlex.quote(str(ROOT))} && env {forwarded} {shlex.join(command)}"
    return Process(ssh_command(host, remote), env, label, waited, (host,))


class ClusterLauncher(Launcher):
    """One process per tf.distribute task, each on its host's slot (over ssh on another host)."""

    def port_hosts(self, params: Params) -> list[str]:
        """The host of every port the job's servers listen on, in the plan's order (none without servers)."""
        return [host for task_hosts in cluster_placement(params).values() for host in task_hosts]

    def processes(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                  ports: list[int] | None) -> list[Process]:
        """multiworker: one worker per process; parameter-server: ps and worker servers plus a coordinator."""
        cluster, extra = cluster_addresses(params, ports)
        with_servers = backend_spec(params.train.backend).with_servers
        processes = []
        for task_type, addresses in cluster.items():
            for index, address in enumerate(addresses):
                tf_config = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}} | extra)
                is_server = with_servers and task_type != "chief"
                # A server gets the job's file too: it names the job's processes on every host (to stop them).
                command = [*PS_SERVER, "--job", str(config_file)] if is_server else trainer_command(config_file)
                label = f"{task_type}{index}" if with_servers else str(index)
                processes.append(_process(address, command, env | {"TF_CONFIG": tf_config}, label, not is_server))
        return processes

    def listens(self, params: Params, controller: str | None) -> list[str]:
        """A TensorFlow gRPC server per task (and, for parameter-server, the tf.data service), every interface."""
        placed = cluster_placement(params)
        dispatcher = placed.pop("data_dispatcher", None)
        servers = ", ".join(f"{task}{index} on {host}"
                            for task, hosts in placed.items() for index, host in enumerate(hosts))
        lines = [f"TensorFlow gRPC servers, every interface (TensorFlow binds 0.0.0.0): {servers}"]
        if dispatcher:
            lines.append(f"the tf.data service, every interface: its dispatcher on {dispatcher[0]}, a data worker with "
                         "each worker")
        return lines

    def in_allocation(self, params: Params, controller: str | None, config_file: Path, job_dir: Path) -> list[str]:
        """Under Slurm: each node's ports picked first (a step of one task per node), then one worker per task."""
        ports = shlex.quote(str(job_dir / "ports")) + '-"$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}"'
        picker = shlex.join(trainer_command(config_file)[:1] + ["-m", "trainer.slurm_cluster", "ports"])
        return [f"export {PORTS_DIR_ENV}={ports}",
                f'srun --ntasks-per-node=1 --kill-on-bad-exit=1 {picker} "${PORTS_DIR_ENV}" '
                f"{params.slurm.tasks_per_node} || exit 1",
                f"{shlex.join(SRUN)} {shlex.join(trainer_command(config_file))} &"]


LAUNCHER = ClusterLauncher()
