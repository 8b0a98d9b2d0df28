"""The processes of one training job: their commands and environments, for every backend. Pure: it contacts no
host (the ports of tf.distribute servers are passed in, picked by the job on their hosts), so a dry run prints it.

horovodrun backends: horovodrun (Gloo, or MPI where built and present); one-process backends: one process; cluster
backends: one process per TF_CONFIG task (multiworker: the workers; parameter-server: parameter servers and
workers, as tf.distribute servers, plus the coordinator). Every training process reads the job's configuration file.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from tasks.launch.elastic import elastic_arguments, elastic_interface
from tasks.launch.hostlist import host_slots, listed, rank_hosts
from tasks.launch.remote.addresses import head_address, is_local
from tasks.launch.remote.command import ssh_command
from tasks.launch.remote.discovery import discovery_script
from tasks.launch.supervise.processes import Process
from tasks.launch.supervise.watch import JobLimits
from tasks.params import Params
from tasks.paths import ROOT
from tasks.tracking.mlflow_store import tracking_uri
from trainer.backends.registry import backend_spec
from trainer.protocol import HEARTBEAT_ENV
from trainer.sharding import TrainingPlan, training_plan

PS_SERVER = [sys.executable, "-m", "trainer.backends.ps_server"]
# ssh passes almost none of the environment: what a process started on another host needs, named
FORWARDED_OVER_SSH = ("TF_CONFIG", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "PYTHONPATH", "PYTHONUNBUFFERED",
                      "TF_CPP_MIN_LOG_LEVEL", HEARTBEAT_ENV)
UNPICKED_PORT = "<port>"  # a dry run's placeholder: ports are picked on their hosts at launch
Placement = dict[str, list[str]]  # task type -> the host of each task


def trainer_command(config_file: Path) -> list[str]:
    """One training process reading the job's configuration file."""
    return [sys.executable, "-m", "trainer", "--config", str(config_file)]


def stall_arguments(stall_seconds: int) -> list[str]:
    """Horovod's stall check: a warning at half the time, shutdown at the full time (off by default in Horovod)."""
    if stall_seconds <= 0:
        return ["--no-stall-check"]
    warning = max(1, stall_seconds // 2)
    return ["--stall-check-warning-time-seconds", str(warning),
            "--stall-check-shutdown-time-seconds", str(max(stall_seconds, warning + 1))]


def horovod_command(params: Params, controller: str, config_file: Path) -> list[str]:
    """horovodrun over the configured hosts, with the stall check and any extra arguments passed through."""
    train = params.train
    where = ["-hostfile", train.hostfile] if train.hostfile else \
        ["-H", ",".join(f"{h}:{n}" for h, n in host_slots(train).items())]
    interface = train.network_interface
    if train.elastic:  # Horovod: the hosts come from the discovery script
        where = elastic_arguments(train.elastic, discovery_script(train.elastic, config_file.parent))
        interface = elastic_interface(train, host_slots(train))
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    return [horovodrun, f"--{controller}", "-np", str(train.np), *where, *stall_arguments(train.stall_timeout_seconds),
            *(["--network-interface", interface] if interface else []),
            *train.horovodrun_args, *trainer_command(config_file)]


def rank_environment(run_id: str | None = None) -> dict[str, str]:
    """The environment each process inherits: this checkout on the path, unbuffered output, and the MLflow store
    and run when rank 0 shares this machine's filesystem (None: rank 0 prints its metrics for the launcher)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MLFLOW_TRACKING_URI=tracking_uri())
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    else:
        env.pop("MLFLOW_RUN_ID", None)
    return env


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


def port_hosts(params: Params) -> list[str]:
    """The host of every port the job's servers listen on, in the plan's order (none without servers)."""
    if backend_spec(params.train.backend).launcher != "cluster":
        return []
    return [host for task_hosts in cluster_placement(params).values() for host in task_hosts]


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


def cluster_processes(params: Params, config_file: Path, env: dict[str, str],
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


def controller_environment(controller: str) -> dict[str, str]:
    """Open MPI refuses to run as root unless told twice (containers, the test cluster)."""
    if controller == "mpi" and os.geteuid() == 0:
        return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return {}


def launch_plan(params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                ports: list[int] | None = None) -> list[Process]:
    """The processes of one training job (controller: Horovod's, None for tf.distribute backends; ports: of the
    servers, in port_hosts' order)."""
    env = env | {HEARTBEAT_ENV: f"{JobLimits(params.train.stall_timeout_seconds).heartbeat_seconds:g}"}
    launcher = backend_spec(params.train.backend).launcher
    if launcher == "horovodrun" and controller is not None:
        return [Process(horovod_command(params, controller, config_file), env | controller_environment(controller),
                        hosts=rank_hosts(params.train))]
    if launcher == "cluster":
        return cluster_processes(params, config_file, env, ports)
    return [Process(trainer_command(config_file), env, "0")]


def training_data_plan(params: Params, manifest: dict, gpus_per_host: int) -> TrainingPlan:
    """Each input pipeline's share of the training split per epoch, as the processes will cut it (the backend's
    spec says how many pipelines and what global batch)."""
    train = params.train
    spec = backend_spec(train.backend)
    pipelines = spec.input_pipelines(train.np)
    return training_plan(manifest, pipelines, spec.global_batch(train.batch_size, train.np, gpus_per_host) // pipelines,
                         train.seed)


def data_plan_lines(params: Params, manifest: dict, gpus_per_host: int) -> list[str]:
    """The training data plan in words, one line per input pipeline."""
    lines = training_data_plan(params, manifest, gpus_per_host).lines()
    if backend_spec(params.train.backend).with_servers:
        shared = f"the {params.train.np} workers together (tf.data service, each batch to one worker)"
        lines = [line.replace("rank 0", shared, 1) for line in lines]
    return lines


def describe_launch(params: Params, controller: str | None, config_file: Path) -> list[str]:
    """The launch plan in words: each process's host and command line (server ports are picked at launch)."""
    processes = launch_plan(params, controller, config_file, {"TF_CONFIG": "{}"})
    lines = []
    for process in processes:
        where = ", ".join(f"rank {rank} on {host}" for rank, host in enumerate(process.hosts)) \
            if process.label is None else f"{process.label} on {process.hosts[0]}"
        lines.append(f"{where}: {shlex.join(process.command)}")
    return lines
