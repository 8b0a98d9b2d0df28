"""Horovod's build on this machine (`horovodrun --check-build`) and the controller a job uses: Gloo or MPI."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tasks.launch.errors import PreflightError
from tasks.launch.horovodrun_cli import CHECK_BUILD_CACHE
from trainer.config import TrainParams


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
