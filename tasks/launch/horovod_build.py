"""Horovod's build on this machine (`horovodrun --check-build`) and the controller a job uses: Gloo or MPI."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tasks.launch.errors import PreflightError
from tasks.launch.horovodrun_cli import CHECK_BUILD_CACHE
from trainer.choices import CONTROLLERS, controller_spec, resolve_controller
from trainer.config import TrainParams


def check_build_report() -> str:
    """`horovodrun --check-build`, as scripts/setup.sh recorded it (run now when it did not)."""
    if CHECK_BUILD_CACHE.is_file():
        return CHECK_BUILD_CACHE.read_text()
    horovodrun = Path(sys.executable).with_name("horovodrun")
    done = subprocess.run([str(horovodrun), "--check-build"], capture_output=True, text=True, timeout=300)
    return done.stdout


def built_controllers(report: str) -> set[str]:
    """The controllers Horovod was built with, from the report's controllers section."""
    controllers_section = report.split("Available Tensor Operations")[0]
    return {spec.name for spec in CONTROLLERS.values() if spec.build_mark in controllers_section}


def controller(train: TrainParams, report: str) -> str:
    """The controller the job uses: the requested one, or for auto MPI when Horovod has it and mpirun exists."""
    return resolve_controller(train.controller, train.elastic is not None, built_controllers(report),
                              shutil.which("mpirun") is not None)


def check_horovod(train: TrainParams) -> str:
    """Horovod built with TensorFlow and the controller to use; returns that controller."""
    report = check_build_report()
    if "[X] TensorFlow" not in report:
        raise PreflightError("Horovod is not built with TensorFlow (run `make setup`)")
    chosen = controller(train, report)
    if chosen not in built_controllers(report):
        raise PreflightError(f"Horovod is not built with the {chosen.upper()} controller")
    if controller_spec(chosen).needs_mpirun and not shutil.which("mpirun"):
        raise PreflightError(f"controller {chosen} needs mpirun on PATH")
    if train.jit_compile:
        raise PreflightError("jit_compile needs Horovod's XLA ops, which this build leaves out: "
                             "use a tf.distribute backend")
    return chosen
