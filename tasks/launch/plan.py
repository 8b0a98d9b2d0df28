"""The processes of one training job: their commands and environments, for every backend, as the backend's
launcher (tasks/launch/launchers/) starts them. Pure: it contacts no host (the ports of tf.distribute servers are
passed in, picked by the job on their hosts), so a dry run prints it. Every training process reads the job's
configuration file.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from tasks.launch.environment import JOB_DEFAULTS, rank_environment
from tasks.launch.launchers.choose import launcher_for
from tasks.launch.supervise.processes import Process
from tasks.launch.supervise.watch import JobLimits
from tasks.params import Params
from tasks.redaction import redact
from trainer.backend_specs import backend_spec
from trainer.protocol import HEARTBEAT_ENV
from trainer.sharding import TrainingPlan, training_plan


def port_hosts(params: Params) -> list[str]:
    """The host of every port the job's servers listen on, in the order launch_plan takes them (none without
    servers)."""
    return launcher_for(params).port_hosts(params)


def job_environment(params: Params, env: dict[str, str]) -> dict[str, str]:
    """What every process of the job gets: the job's defaults (JOB_DEFAULTS) unless `env` sets them, `env`, and how
    often to say it is alive."""
    return JOB_DEFAULTS | env | {HEARTBEAT_ENV: f"{JobLimits(params.train.stall_timeout_seconds).heartbeat_seconds:g}"}


def launch_plan(params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                ports: list[int] | None = None) -> list[Process]:
    """The processes of one training job, as its backend's launcher starts them (controller: Horovod's, None for
    tf.distribute backends; ports: of the servers, in port_hosts' order; None: placeholders)."""
    return launcher_for(params).processes(params, controller, config_file, job_environment(params, env), ports)


def prepare_launch(params: Params, controller: str | None, config_file: Path, env: dict[str, str]) -> None:
    """What the launcher writes before the processes start (a scheduler's batch script)."""
    launcher_for(params).prepare(params, controller, config_file, job_environment(params, env))


def listening_lines(params: Params, controller: str | None) -> list[str]:
    """What the job's processes will listen on, and where (each for the job's length), one `listens:` line each."""
    opened = launcher_for(params).listens(params, controller)
    return [f"listens: {what}, for the job" for what in opened] or ["listens: nothing (no process opens a port)"]


def training_data_plan(params: Params, manifest: dict, gpus_per_host: int) -> TrainingPlan:
    """Each input pipeline's share of the training split per epoch, as the processes will cut it (the backend's
    spec says how many pipelines and what global batch)."""
    train = params.train
    pipelines, batch = backend_spec(train.backend).pipeline_batches(train.batch_size, train.np, gpus_per_host)
    return training_plan(manifest, pipelines, batch, train.seed)


def data_plan_lines(params: Params, manifest: dict, gpus_per_host: int) -> list[str]:
    """The training data plan in words, one line per input pipeline."""
    lines = training_data_plan(params, manifest, gpus_per_host).lines()
    if backend_spec(params.train.backend).with_servers:
        shared = f"the {params.train.np} workers together (tf.data service, each batch to one worker)"
        lines = [line.replace("rank 0", shared, 1) for line in lines]
    return lines


def describe_launch(params: Params, controller: str | None, config_file: Path) -> list[str]:
    """The launch plan in words: each process's host and command line (server ports are picked at launch), or
    the launcher's own description (a scheduler's batch script)."""
    described = launcher_for(params).describe(params, controller, config_file,
                                              job_environment(params, rank_environment()))
    if described is not None:
        return described
    processes = launch_plan(params, controller, config_file, {"TF_CONFIG": "{}"})
    lines = []
    for process in processes:
        where = ", ".join(f"rank {rank} on {host}" for rank, host in enumerate(process.hosts)) \
            if process.label is None else f"{process.label} on {process.hosts[0]}"
        lines.append(f"{where}: {redact(shlex.join(process.command))}")
    return lines
