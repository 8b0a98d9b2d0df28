"""Ranks started ahead: a pipeline run's training job, when horovodrun starts it on this machine alone, is launched
while the steps before training run (preflight, version, open-run), so that each rank's import of TensorFlow and
Horovod (4 s here, every run) is done when the training step comes. The ranks wait for the job's configuration
file (trainer/ahead.py); the training step writes it there when the job it plans is the one started (the same
processes, commands and environments), and follows the processes as if it had just started them. Otherwise (the
plan differs, a rank ended, the run was skipped, failed or interrupted) the early processes are stopped: a run
never trains with a job other than its own plan.

One job ahead per process (the pipeline's): start_ranks_ahead at the run's start, take_ranks_ahead in the
training step's launch, discard_ranks_ahead when the run ends however it ends (and at exit). A job taken stays
known here until then: a Ctrl-C between the take and the job's supervision still stops it."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from tasks.atomic import write_text_atomic
from tasks.launch.environment import rank_environment
from tasks.launch.hostlist import host_slots
from tasks.launch.launchers.choose import scheduler_for
from tasks.launch.plan import launch_plan, port_hosts
from tasks.launch.preflight import PreflightError, check_settings
from tasks.launch.remote.addresses import is_local
from tasks.launch.supervise.processes import Process, StartedJob, start_job
from tasks.params import Params
from tasks.paths import ROOT, WORKSPACE
from trainer.ahead import launcher_alive
from trainer.backend_specs import backend_spec
from trainer.config import CONFIG_FILE_NAME


@dataclass
class RanksAhead:
    """A job started ahead: its plan (as launch_plan gives it for config_file), where it waits, the processes started
    (the plan's, told to wait) and their job."""
    plan: list[Process]
    config_file: Path
    started: list[Process]
    job: StartedJob
    taken: bool = False


PlanFor = Callable[[Path], list[Process]]  # the training step's plan of its job, for a configuration file
_AHEAD: list[RanksAhead] = []  # this process's job ahead, at most one, until the run ends


def may_start_ahead(params: Params) -> bool:
    """A job horovodrun starts on this machine alone: no scheduler, not elastic, no server ports to pick."""
    train = params.train
    return (scheduler_for(params) is None and backend_spec(train.backend).launcher == "horovodrun"
            and train.elastic is None and all(is_local(host) for host in host_slots(train))
            and not port_hosts(params))


def ahead_plan(params: Params, controller: str | None, config_file: Path) -> list[Process]:
    """The job's processes as the training step will plan them on this machine (rank 0 spools its metrics here)."""
    return launch_plan(params, controller, config_file, rank_environment(spool_metrics=True), [])


def remove_stale_folders(folders: Path) -> None:
    """The job files of runs whose process is gone (killed: no `finally` ran) removed."""
    for folder in folders.glob("job-*-*"):
        owner = folder.name.split("-")[1]
        if owner.isdigit() and not launcher_alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)


def start_ranks_ahead(params: Params, folders: Path | None = None) -> None:
    """Start the run's training job now, waiting for its configuration (in a folder of job files made in `folders`,
    the workspace's by default), when it may be (settings the preflight will refuse: not started)."""
    if _AHEAD or not may_start_ahead(params):
        return  # started already, taken, or not this kind of job
    try:
        controller = check_settings(params)
    except PreflightError:
        return  # the preflight says why, in its line
    folders = folders or WORKSPACE.ranks_ahead_dir
    folders.mkdir(parents=True, exist_ok=True)
    remove_stale_folders(folders)
    folder = Path(tempfile.mkdtemp(prefix=f"job-{os.getpid()}-", dir=folders))
    config_file = folder / CONFIG_FILE_NAME
    plan = ahead_plan(params, controller, config_file)
    waiting = ["--ahead-of", str(os.getpid()), "--backend", params.train.backend]
    ahead = RanksAhead(plan, config_file, [replace(process, command=[*process.command, *waiting]) for process in plan],
                       StartedJob())
    _AHEAD.append(ahead)  # known before its processes start: a Ctrl-C meanwhile stops what started
    start_job(ahead.started, ROOT, ahead.job)


def take_ranks_ahead(plan_for: PlanFor, config_file: Path) -> tuple[list[Process], Path, StartedJob] | None:
    """The job ahead, when it is the one planned (plan_for(its config file)), not taken yet, and all its processes
    run: its configuration (config_file's copy) written where it waits; else None (a job ahead not taken: stopped)."""
    ahead = next((waiting for waiting in _AHEAD if not waiting.taken), None)
    if ahead is None:
        return None
    if not ahead.job.alive() or plan_for(ahead.config_file) != ahead.plan:
        _discard(ahead)
        return None
    write_text_atomic(ahead.config_file, config_file.read_text())
    ahead.taken = True
    return ahead.started, ahead.config_file, ahead.job


def _discard(ahead: RanksAhead) -> None:
    """Its processes stopped (again, if they were: nothing then) and its job files removed; known here until its
    processes are stopped (an interrupt meanwhile: the call at exit stops them)."""
    try:
        ahead.job.stop()
        if ahead in _AHEAD:
            _AHEAD.remove(ahead)
    finally:
        shutil.rmtree(ahead.config_file.parent, ignore_errors=True)


def discard_ranks_ahead() -> None:
    """When the run ends: the job ahead stopped (the run skipped, failed or interrupted) or, taken, its files
    removed."""
    for ahead in list(_AHEAD):
        _discard(ahead)


atexit.register(discard_ranks_ahead)
