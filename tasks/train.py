"""train: preflight, then launch the training processes for the chosen backend; rank 0 logs to MLflow.

horovod / horovod-tape: horovodrun (Gloo, or MPI where built and present); mirrored / central-storage /
one-device: one process; multiworker: one process per worker with TF_CONFIG; parameter-server: parameter
servers and workers (tf.distribute servers) plus the coordinator.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tasks.atomic import atomic_dir
from tasks.launch import Process, run_processes
from tasks.params import InputParams, Params
from tasks.paths import OUTPUTS_DIR, ROOT
from tasks.preflight import host_slots, preflight
from tasks.tracking import tracking_uri

TRAINER = [sys.executable, "-m", "trainer"]


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and what the training reported."""
    model_dir: Path
    summary: dict


def augmentation_on(inputs: InputParams, manifest: dict) -> bool:
    """`auto` augments image folders and images of 64 px or more (seed 002's regime), not small digits."""
    if inputs.augment != "auto":
        return inputs.augment == "on"
    height, width, _ = manifest["image_shape"]
    return manifest["source"].startswith("folder:") or min(height, width) >= 64


def config_key(params: Params, manifest: dict, with_np: bool = True) -> str:
    """What makes two trainings the same config (not epochs: a longer relaunch continues the same run)."""
    train = params.train.model_dump(exclude={"epochs", "resume", "keep_checkpoints", "scaling_np"}
                                    | (set() if with_np else {"np", "hosts", "hostfile"}))
    blob = json.dumps({"train": train, "input": params.input.model_dump(), "data": manifest.get("fingerprint")},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def trainer_args(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path, augmented: bool) -> list[str]:
    """The trainer's command line arguments (the same for every backend)."""
    train, inputs = params.train, params.input
    args = ["--backend", train.backend, "--data-dir", str(data_dir), "--out-dir", str(out_dir),
            "--checkpoint-dir", str(checkpoint_dir), "--model", train.model, "--epochs", str(train.epochs),
            "--batch-size", str(train.batch_size), "--learning-rate", str(train.learning_rate),
            "--warmup-epochs", str(train.warmup_epochs), "--precision", train.precision,
            "--seed", str(train.seed), "--keep-checkpoints", str(train.keep_checkpoints),
            "--replicas", str(train.np), "--steps-per-execution", str(train.steps_per_execution)]
    flags = {"--no-scale-lr": not train.scale_lr, "--jit-compile": train.jit_compile, "--augment": augmented,
             "--no-cache": not inputs.cache, "--fp16-allreduce": train.fp16_allreduce,
             "--no-resume": not train.resume}
    args += [flag for flag, wanted in flags.items() if wanted]
    return args + (["--image-size", str(inputs.image_size)] if inputs.image_size else [])


def horovod_command(params: Params, controller: str, args: list[str]) -> list[str]:
    """horovodrun over the configured hosts, with any extra arguments passed through."""
    train = params.train
    where = ["-hostfile", train.hostfile] if train.hostfile else \
        ["-H", ",".join(f"{h}:{n}" for h, n in host_slots(train).items())]
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    return [horovodrun, f"--{controller}", "-np", str(train.np), *where, *train.horovodrun_args, *TRAINER, *args]


def rank_environment(run_id: str | None) -> dict[str, str]:
    """The environment each process inherits: tf-keras, this checkout on the path, the MLflow run."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MLFLOW_TRACKING_URI=tracking_uri())
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    else:
        env.pop("MLFLOW_RUN_ID", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _addresses(hosts: dict[str, int], count: int) -> list[str]:
    """`count` host:port addresses, filling each host's slots in turn."""
    names = [host for host, slots in hosts.items() for _ in range(slots)]
    names += ["localhost"] * max(0, count - len(names))
    return [f"{host}:{_free_port()}" for host in names[:count]]


def _process(host_port: str, command: list[str], env: dict[str, str], label: str, waited: bool) -> Process:
    """A local process, or one started over ssh on its host (same checkout path there)."""
    host = host_port.rsplit(":", 1)[0]
    if host in ("localhost", "127.0.0.1", socket.gethostname()):
        return Process(command, env, label, waited)
    import shlex
    remote = f"cd {shlex.quote(str(ROOT))} && env TF_CONFIG={shlex.quote(env['TF_CONFIG'])} " \
             f"MLFLOW_RUN_ID={shlex.quote(env.get('MLFLOW_RUN_ID', ''))} {shlex.join(command)}"
    return Process(["ssh", host, remote], env, label, waited)


def cluster_processes(params: Params, args: list[str], env: dict[str, str]) -> list[Process]:
    """multiworker: one worker per process; parameter-server: ps and worker servers plus a coordinator."""
    train = params.train
    hosts = host_slots(train) if (train.hosts or train.hostfile) else {}
    cluster = {"worker": _addresses(hosts, train.np)}
    if train.backend == "parameter-server":
        cluster |= {"ps": _addresses({}, train.num_ps), "chief": _addresses({}, 1)}
    processes = []
    for task_type, addresses in cluster.items():
        for index, address in enumerate(addresses):
            config = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
            is_server = train.backend == "parameter-server" and task_type != "chief"
            command = [sys.executable, "-m", "trainer.server"] if is_server else TRAINER + args
            label = f"{task_type}{index}" if train.backend == "parameter-server" else str(index)
            processes.append(_process(address, command, env | {"TF_CONFIG": config}, label, not is_server))
    return processes


def launch_plan(params: Params, controller: str | None, args: list[str], env: dict[str, str]) -> list[Process]:
    """The processes of one training job."""
    backend = params.train.backend
    if controller is not None:
        return [Process(horovod_command(params, controller, args), env)]
    if backend in ("multiworker", "parameter-server"):
        return cluster_processes(params, args, env)
    return [Process(TRAINER + args, env, "0")]


def train(params: Params, data_dir: Path, out_dir: Path, run_id: str | None,
          on_line: Callable[[str], None] = print, extra_args: list[str] | None = None,
          checkpoint_root: Path = OUTPUTS_DIR / "checkpoints") -> TrainResult:
    """Preflight, launch, wait; returns the model the lead process saved. Raises RankFailed naming a failure.

    Checkpoints go to checkpoint_root/<config key>, so a relaunch of the same config resumes from them.
    """
    from trainer.records import read_manifest
    controller = preflight(params, data_dir)
    manifest = read_manifest(data_dir)
    checkpoint_dir = checkpoint_root / config_key(params, manifest)
    with atomic_dir(out_dir) as work_dir:
        args = trainer_args(params, data_dir, work_dir, checkpoint_dir, augmentation_on(params.input, manifest))
        processes = launch_plan(params, controller, args + list(extra_args or []), rank_environment(run_id))
        for process in processes:
            on_line("launching: " + " ".join(process.command))
        run_processes(processes, ROOT, on_line)
        summary = json.loads((work_dir / "train_summary.json").read_text())
    return TrainResult(out_dir, summary)
