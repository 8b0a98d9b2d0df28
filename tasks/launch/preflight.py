"""Preflight: everything that can be checked before a launch, each failure one clear line."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tasks.launch.elastic import elastic_problem
from tasks.launch.hosts import probe_remote_hosts, remote_host_problem
from tasks.launch.shipping import data_key, hosts_without_shared_fs, shared_fs_problem
from tasks.params import Params
from tasks.paths import PREPARED_DIR
from trainer.backends import CLUSTER_BACKENDS, HOROVOD_BACKENDS
from trainer.config import TrainParams
from trainer.data import model_input_shape
from trainer.models import MODEL_CATALOG
from trainer.prepared_data import MANIFEST_NAME, read_manifest

CHECK_BUILD_CACHE = Path(sys.executable).parent.parent / ".ringflow-check-build"


class PreflightError(RuntimeError):
    """A launch would fail; the message says why in one line."""


def check_build_report() -> str:
    """`horovodrun --check-build`, as scripts/setup.sh recorded it (run now when it did not)."""
    if CHECK_BUILD_CACHE.is_file():
        return CHECK_BUILD_CACHE.read_text()
    horovodrun = Path(sys.executable).with_name("horovodrun")
    done = subprocess.run([str(horovodrun), "--check-build"], capture_output=True, text=True, timeout=300)
    return done.stdout


def controller(train: TrainParams, report: str) -> str:
    """'mpi' or 'gloo': the requested one, or for auto MPI when Horovod has it and mpirun exists."""
    if train.controller != "auto":
        return train.controller
    if train.elastic:  # Horovod's elastic mode runs on Gloo only
        return "gloo"
    return "mpi" if "[X] MPI" in report and shutil.which("mpirun") else "gloo"


def parse_hosts(hosts: str) -> dict[str, int]:
    """'h1:4,h2:2' -> {'h1': 4, 'h2': 2} (a host without ':N' has 1 slot)."""
    slots = {}
    for item in filter(None, (part.strip() for part in hosts.split(","))):
        name, _, count = item.partition(":")
        if count and not count.isdigit():
            raise PreflightError(f"bad hosts entry {item!r}: expected host or host:slots")
        slots[name] = slots.get(name, 0) + int(count or 1)
    return slots


def read_hostfile(path: str) -> dict[str, int]:
    """A horovodrun hostfile: 'host slots=N' (or 'host:N') per line."""
    file = Path(path)
    if not file.is_file():
        raise PreflightError(f"hostfile {file} does not exist")
    lines = [line.split("#")[0].strip() for line in file.read_text().splitlines()]
    entries = [line.replace(" slots=", ":").replace("slots=", ":") for line in lines if line]
    return parse_hosts(",".join(entries))


def host_slots(train: TrainParams) -> dict[str, int]:
    """The hosts a launch uses and their slots (localhost with np slots by default)."""
    if train.hostfile:
        return read_hostfile(train.hostfile)
    if train.hosts:
        return parse_hosts(train.hosts)
    return {"localhost": train.np}


def check_hosts(train: TrainParams) -> dict[str, int]:
    slots = host_slots(train)
    for host in slots:
        try:
            socket.gethostbyname(host)
        except OSError:
            raise PreflightError(f"host {host!r} does not resolve") from None
    listed = bool(train.hosts or train.hostfile)
    placed = train.backend in HOROVOD_BACKENDS or (train.backend in CLUSTER_BACKENDS and listed)
    if placed and train.np > sum(slots.values()):
        raise PreflightError(f"np {train.np} exceeds the {sum(slots.values())} slots of "
                             + ",".join(f"{h}:{n}" for h, n in slots.items()))
    return slots


def check_horovod(train: TrainParams) -> str:
    """Horovod built with TensorFlow and the controller to use; returns that controller."""
    report = check_build_report()
    if "[X] TensorFlow" not in report:
        raise PreflightError("Horovod is not built with TensorFlow (run `make setup`)")
    chosen = controller(train, report)
    if f"[X] {'MPI' if chosen == 'mpi' else 'Gloo'}" not in report.split("Available Tensor Operations")[0]:
        raise PreflightError(f"Horovod is not built with the {chosen.upper()} controller")
    if chosen == "mpi" and not shutil.which("mpirun"):
        raise PreflightError("controller mpi needs mpirun on PATH")
    if train.jit_compile:
        raise PreflightError("jit_compile needs Horovod's XLA ops, which this build leaves out: "
                             "use a tf.distribute backend")
    return chosen


@dataclass(frozen=True)
class LaunchCheck:
    """What preflight found out for the launch: Horovod's controller (None: tf.distribute), the remote hosts that do
    not share this machine's filesystem, and those of them that already hold this version of the data."""
    controller: str | None
    unshared_hosts: tuple[str, ...] = ()
    hosts_with_data: tuple[str, ...] = ()


def preflight_launch(params: Params, data_dir: Path = PREPARED_DIR) -> LaunchCheck:
    """The checks that need no data: hosts (probed over ssh), slots, the shared filesystem, Horovod's build."""
    slots = check_hosts(params.train)
    horovod = params.train.backend in HOROVOD_BACKENDS
    answers = probe_remote_hosts(list(slots), data_dir)
    problem = remote_host_problem(slots, horovod, answers) or shared_fs_problem(params.train.shared_fs, answers)
    if problem:
        raise PreflightError(problem)
    unshared = hosts_without_shared_fs(params.train.shared_fs, answers)
    if problem := elastic_problem(params.train, unshared):
        raise PreflightError(problem)
    controller = check_horovod(params.train) if horovod else None
    key = data_key(data_dir) if unshared and (data_dir / MANIFEST_NAME).is_file() else None
    return LaunchCheck(controller, unshared, tuple(host for host in unshared if answers[host]["data_key"] == key))


def preflight(params: Params, data_dir: Path) -> str | None:
    """Check data, model fit, hosts and Horovod; returns the Horovod controller (None for tf.distribute)."""
    return check_launch(params, data_dir).controller


def check_launch(params: Params, data_dir: Path) -> LaunchCheck:
    """preflight, with all it found out for the launch."""
    try:
        manifest = read_manifest(data_dir)
    except FileNotFoundError as error:
        raise PreflightError(str(error)) from None
    shape = model_input_shape(manifest, params.input.image_size)
    needed = MODEL_CATALOG[params.train.model].min_size
    if min(shape[:2]) < needed:
        raise PreflightError(f"model {params.train.model} needs inputs of at least {needed}x{needed}; "
                             f"the data is {shape[0]}x{shape[1]} (set input.image_size)")
    check_global_batch(params, manifest)
    return preflight_launch(params, data_dir)


def check_global_batch(params: Params, manifest: dict) -> None:
    """One optimizer step needs a global batch of records: more than the training split holds is bad input."""
    records = manifest["splits"]["train"]["count"]
    global_batch = params.train.batch_size * params.train.np
    if global_batch > records:
        raise PreflightError(f"the global batch (train.batch_size {params.train.batch_size} x {params.train.np} "
                             f"replicas = {global_batch}) exceeds the {records} training records: "
                             f"lower train.batch_size or train.np")
