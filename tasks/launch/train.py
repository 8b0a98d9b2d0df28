"""train: preflight, write the job's configuration, launch its processes and wait; rank 0 logs to MLflow."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tasks.atomic import atomic_dir
from tasks.launch.diagnosis import RankFailed
from tasks.launch.elastic import prepare_discovery
from tasks.launch.hosts import stop_remote_processes
from tasks.launch.metrics_relay import relay_metrics
from tasks.launch.plan import launch_plan, rank_environment
from tasks.launch.preflight import LaunchCheck, PreflightError, check_launch, host_slots
from tasks.launch.processes import JobLimits, Process, run_processes
from tasks.launch.shipping import Shipment, bring_back, ship_inputs
from tasks.params import Params
from tasks.paths import ROOT
from tasks.versioning.run_state import code_digest
from trainer.checkpoint_files import CheckpointMismatch, check_owner, saved_epochs
from trainer.config import CONFIG_FILE_NAME, InputParams, JobSpec, write_config
from trainer.model_io import read_train_summary
from trainer.prepared_data import read_manifest

PORT_ATTEMPTS = 3  # launches of a job whose server found its port taken at the start


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and what the training reported."""
    model_dir: Path
    summary: dict


def augmentation_on(inputs: InputParams, manifest: dict) -> bool:
    """`auto` augments images of 64 px or more (the ImageNet regime of NVIDIA's nvcnn_hvd), not small digits, of
    whatever source."""
    if inputs.augment != "auto":
        return inputs.augment == "on"
    height, width, _ = manifest["image_shape"]
    return min(height, width) >= 64


def config_key(params: Params, manifest: dict, with_np: bool = True) -> str:
    """What makes two trainings the same config (not epochs: a resumed run may train longer)."""
    not_the_model = {"epochs", "resume_from", "keep_checkpoints", "scaling_np", "tensorboard", "intra_op_threads",
                     "stall_timeout_seconds", "timeout_minutes", "shared_fs", "network_interface"}
    train = params.train.model_dump(exclude=not_the_model
                                    | (set() if with_np else {"np", "hosts", "hostfile"}))
    blob = json.dumps({"train": train, "input": params.input.model_dump(), "data": manifest.get("fingerprint")},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_owner(params: Params, manifest: dict) -> str:
    """Whom a job's checkpoints belong to: its config and the code version."""
    return hashlib.sha256(f"{config_key(params, manifest)}|{code_digest()}".encode()).hexdigest()[:16]


def check_resumable(params: Params, checkpoint_dir: Path, owner: str) -> None:
    """Refuse, before any launch, checkpoints of another config or code version and a job with no epoch left."""
    try:
        check_owner(checkpoint_dir, owner)
    except CheckpointMismatch as error:
        raise PreflightError(str(error)) from None
    done = saved_epochs(checkpoint_dir)
    if done >= params.train.epochs:
        raise PreflightError(f"nothing to train: the run's checkpoints already hold {done} epochs and train.epochs "
                             f"is {params.train.epochs} (raise train.epochs to continue it)")


def job_spec(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path) -> JobSpec:
    """What this launch decides: where the data, model and checkpoints are, whom they belong to, augmentation."""
    manifest = read_manifest(data_dir)
    return JobSpec(data_dir=data_dir, out_dir=out_dir, checkpoint_dir=checkpoint_dir,
                   checkpoint_owner=checkpoint_owner(params, manifest), augment=augmentation_on(params.input, manifest))


def write_trainer_config(params: Params, job: JobSpec) -> Path:
    """The resolved params plus the job, as one file in the job's output directory."""
    return write_config(params.model_dump(mode="json"), job, job.out_dir / CONFIG_FILE_NAME)


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
            on_line: Callable[[str], None]) -> None:
    """Ship what hosts without the shared filesystem need, run the processes, then, however the job ended, stop
    every rank on every host and bring rank 0's results back."""
    to_ship = shipment(check, processes)
    failed = True
    try:
        ship_inputs(to_ship, job.data_dir, config_file, job.checkpoint_dir, on_line)
        run_processes(processes, ROOT, on_line, job_limits(params))
        failed = False
    finally:
        stop_remote_processes([host for process in processes for host in process.hosts], str(config_file))
        bring_back(to_ship, job.out_dir, job.checkpoint_dir, on_line, failed)


def launch(params: Params, job: JobSpec, config_file: Path, check: LaunchCheck, run_id: str | None,
           on_line: Callable[[str], None]) -> None:
    """Plan the job's processes and run them; when a server's port was taken on its host between the pick and its
    start, plan again with new ports (up to PORT_ATTEMPTS launches: nothing has trained yet)."""
    direct_run_id = None if check.unshared_hosts else run_id  # else rank 0's lines carry its metrics here
    for attempt in range(1, PORT_ATTEMPTS + 1):
        processes = launch_plan(params, check.controller, config_file, rank_environment(direct_run_id))
        for process in processes:
            on_line("launching: " + " ".join(process.command))
        try:
            run_job(processes, params, job, config_file, check, relay_metrics(run_id, on_line))
            return
        except RankFailed as failure:
            if not failure.port_taken or attempt == PORT_ATTEMPTS:
                raise
            on_line(f"{failure}; launching again with new ports ({attempt + 1} of {PORT_ATTEMPTS})")


def train(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path, run_id: str | None,
          on_line: Callable[[str], None] = print) -> TrainResult:
    """Preflight, launch, wait; returns the model the lead process saved. Raises RankFailed naming a failure.

    The job resumes from the latest checkpoint in checkpoint_dir when it holds one of the same config and code.
    Rank 0 logs to the MLflow run `run_id` (when given), through its output lines when hosts do not share this
    machine's filesystem.
    """
    check = check_launch(params, data_dir)
    with atomic_dir(out_dir) as work_dir:
        job = job_spec(params, data_dir, work_dir, checkpoint_dir)
        check_resumable(params, checkpoint_dir, job.checkpoint_owner)
        config_file = write_trainer_config(params, job)
        prepare_discovery(params.train, host_slots(params.train), work_dir)
        launch(params, job, config_file, check, run_id, on_line)
        summary = read_train_summary(work_dir)
    return TrainResult(out_dir, summary)
