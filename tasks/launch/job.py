"""A training job: write its configuration, ship what hosts without the shared filesystem need, launch its
processes and wait, bring rank 0's results back; rank 0's metric lines logged to its MLflow run."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from tasks.atomic import atomic_dir
from tasks.launch.ahead import take_ranks_ahead
from tasks.launch.environment import rank_environment
from tasks.launch.hostlist import host_slots
from tasks.launch.job_config import job_spec, trained_already, write_trainer_config
from tasks.launch.launchers.choose import launcher_for
from tasks.launch.output.diagnosis import RankFailed, untagged
from tasks.launch.output.metrics_relay import MetricRelay
from tasks.launch.plan import launch_plan, port_hosts, prepare_launch
from tasks.launch.preflight import LaunchCheck, check_launch
from tasks.launch.remote.discovery import prepare_discovery
from tasks.launch.remote.ports import pick_ports
from tasks.launch.remote.shared_fs import fresh_token
from tasks.launch.remote.shipping import Shipment, bring_back, ship_inputs
from tasks.launch.slurm.states import parse_submitted
from tasks.launch.supervise.processes import JobLimits, Process, StartedJob, run_processes
from tasks.launch.tuning import job_cycle
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR, ROOT
from tasks.redaction import redact
from tasks.tracking import mlflow_store
from trainer.config import JobSpec
from trainer.model_io import read_train_summary
from trainer.protocol import parse_placed

LAUNCH_ATTEMPTS = 3  # launches of a job that failed at its start (a port taken, the launcher's connection lost)


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and what the training reported."""
    model_dir: Path
    summary: dict


def job_limits(params: Params) -> JobLimits:
    timeout = params.train.timeout_minutes
    return JobLimits(params.train.stall_timeout_seconds, timeout * 60 if timeout else None,
                     silence_ends_job=params.train.elastic is None)


def lead_host(processes: list[Process]) -> str:
    """Where rank 0 (Horovod), worker 0 (multiworker) or the coordinator (parameter-server) runs."""
    return next(process.hosts[0] for process in processes if process.label in (None, "0", "chief0"))


def shipment(check: LaunchCheck, processes: list[Process]) -> Shipment:
    """The job's hosts that do not share this machine's filesystem, and rank 0's host."""
    used = {host for process in processes for host in process.hosts}
    return Shipment(tuple(host for host in check.unshared_hosts if host in used), lead_host(processes),
                    check.hosts_with_data)


def run_job(processes: list[Process], params: Params, job: JobSpec, config_file: Path, check: LaunchCheck,
            on_line: Callable[[str], None], started: StartedJob | None = None) -> None:
    """Ship what hosts without the shared filesystem need, run the processes (or follow them, `started` ahead),
    then, however the job ended, stop every rank on every host and bring rank 0's results back."""
    with fresh_token(OUTPUTS_DIR) as guard:  # a host that sees it shares this machine's files: nothing removed
        run_shipped_job(processes, params, job, config_file, replace(shipment(check, processes), guard=guard),
                        on_line, started)


def run_shipped_job(processes: list[Process], params: Params, job: JobSpec, config_file: Path, to_ship: Shipment,
                    on_line: Callable[[str], None], started: StartedJob | None = None) -> None:
    """run_job's work, with what the hosts without the shared filesystem get."""
    ran_on = [host for process in processes for host in process.hosts]  # and where ranks said they are (elastic)

    def noting_hosts(line: str) -> None:
        if placed := parse_placed(untagged(line)):
            ran_on.append(placed[2])
        on_line(line)
    failed = True
    try:
        ship_inputs(to_ship, job.data_dir, config_file, job.checkpoint_dir, on_line)
        run_processes(processes, ROOT, noting_hosts, job_limits(params), started)
        failed = False
    finally:
        launcher_for(params).stop(ran_on, config_file)
        bring_back(to_ship, job.out_dir, job.checkpoint_dir, on_line, failed)


def noting_scheduler_jobs(run_id: str | None, on_line: Callable[[str], None]) -> Callable[[str], None]:
    """An on_line that tags the MLflow run with the id of the scheduler's job it submitted."""

    def handle(line: str) -> None:
        if run_id is not None and (job_id := parse_submitted(line)):
            mlflow_store.set_tags(run_id, {"slurm.job_id": job_id})
        on_line(line)
    return handle


def planned_job(params: Params, controller: str | None, config_file: Path, env: dict[str, str], ports: list[int],
                first: bool) -> tuple[list[Process], Path, StartedJob | None]:
    """The job's processes, the configuration file they read and, when they were started ahead (first launch only)
    as planned, their running job (the configuration then written where they wait: tasks/launch/ahead.py)."""
    def plan_for(path: Path) -> list[Process]:
        return launch_plan(params, controller, path, env, ports)
    ahead = take_ranks_ahead(plan_for, config_file) if first else None
    return ahead or (plan_for(config_file), config_file, None)


def launch(params: Params, job: JobSpec, config_file: Path, check: LaunchCheck, run_id: str | None,
           on_line: Callable[[str], None]) -> None:
    """Plan the job's processes and run them; when it failed at its start (a server's port taken on its host between
    the pick and its start, the launcher's own connection lost before any rank spoke), plan again with new ports (up
    to LAUNCH_ATTEMPTS launches: nothing has trained yet)."""
    shared = not check.unshared_hosts  # rank 0 writes the metric spool here itself, before it prints each epoch
    for attempt in range(1, LAUNCH_ATTEMPTS + 1):
        ports = pick_ports(port_hosts(params))  # on the host that listens on each
        env = rank_environment(spool_metrics=shared)
        processes, job_config, started = planned_job(params, check.controller, config_file, env, ports, attempt == 1)
        prepare_launch(params, check.controller, job_config, env)
        for process in processes:
            on_line("launching: " + redact(shlex.join(process.command)))
        relay = MetricRelay(run_id, job, noting_scheduler_jobs(run_id, on_line), spooled_by_rank=shared)
        try:
            run_job(processes, params, job, job_config, check, relay, started)
            return
        except RankFailed as failure:
            if not failure.launch_again or attempt == LAUNCH_ATTEMPTS:
                raise
            on_line(f"{failure}; launching again with new ports ({attempt + 1} of {LAUNCH_ATTEMPTS})")
        finally:
            relay.close()


def train(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path, run_id: str | None,
          on_line: Callable[[str], None] = print, check: LaunchCheck | None = None,
          model_outputs: bool = True) -> TrainResult:
    """Launch, wait; returns the model the lead process saved. Raises RankFailed naming a failure.

    `check`: what the run's preflight found (None: run the preflight now). The job resumes from the latest
    checkpoint in checkpoint_dir when it holds one of the same config and code. With model_outputs the lead also
    writes what the steps after the training read (trainer/model_outputs.py). Rank 0's metrics go to the MLflow run
    `run_id` (when given) through its output lines, which this process logs.
    """
    if trained_already(params, data_dir, out_dir, checkpoint_dir):
        on_line(f"training: this run's job had trained all {params.train.epochs} epochs into {out_dir}; recording it")
        return TrainResult(out_dir, read_train_summary(out_dir))
    check = check or check_launch(params, data_dir)
    with atomic_dir(out_dir) as work_dir:
        job = job_spec(params, data_dir, work_dir, checkpoint_dir, model_outputs,
                       job_cycle(params, check.gpus_per_host, check.gradient_bytes))
        config_file = write_trainer_config(params, job)
        prepare_discovery(params.train, host_slots(params.train), work_dir)
        launch(params, job, config_file, check, run_id, on_line)
        summary = read_train_summary(work_dir)
    return TrainResult(out_dir, summary)
