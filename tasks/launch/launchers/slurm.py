"""train.scheduler: slurm: the job is a Slurm batch job. Its script (tasks/launch/slurm/batch_script.py) is written
into the run's workspace (<workspace>/slurm/job.sh, beside the model) and submitted by one follower process here,
which prints the ranks' lines from the job's output and the job's states, and cancels the job when it is stopped.
How the ranks start inside the job follows the backend's launcher in the registry."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Callable

from tasks.atomic import write_bytes_atomic
from tasks.launch.launchers.base import Launcher, Scheduler
from tasks.launch.slurm.batch_script import SCRIPT_NAME, batch_script, unsupported
from tasks.launch.slurm.commands import SlurmError, cancel, live_jobs
from tasks.launch.slurm.follow import JOB_IDS_FILE, run_prefix
from tasks.launch.slurm.preflight import slurm_problem
from tasks.launch.supervise.processes import Process
from tasks.params import Params, ParamsError
from trainer.choices import controller_spec

FOLLOWER = [sys.executable, "-m", "tasks.launch.slurm.follow"]
ALLOCATED = "<allocated>"  # a rank's host until it says where it runs


def job_dir(config_file: Path) -> Path:
    """The job's Slurm files: beside the model in the run's workspace (they outlive a failed training)."""
    return config_file.parent.parent / "slurm"


class SlurmLauncher(Launcher):
    """The follower here, which submits the batch script and speaks for every rank; `ranks` gives the launcher
    that starts a backend's processes inside the allocation."""

    def __init__(self, ranks: Callable[[str], Launcher]) -> None:
        self.ranks = ranks

    def processes(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                  ports: list[int] | None) -> list[Process]:
        """The follower, which submits the script and speaks for every rank (label None: the lines carry rank tags)."""
        directory = job_dir(config_file)
        slurm = params.slurm
        command = [*FOLLOWER, str(directory / SCRIPT_NAME), str(directory), str(params.train.np),
                   f"{slurm.pending_timeout_minutes:g}", str(slurm.max_requeues), *slurm.sbatch_args]
        # Slurm decides which GPUs each task sees (CUDA_VISIBLE_DEVICES per task): this machine's choice is not
        # passed
        submit_env = {key: value for key, value in env.items() if key != "CUDA_VISIBLE_DEVICES"}
        return [Process(command, submit_env, hosts=(ALLOCATED,) * params.train.np)]

    def prepare(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str]) -> None:
        """The batch script, written where the follower submits it from."""
        directory = job_dir(config_file)
        directory.mkdir(parents=True, exist_ok=True)
        script = batch_script(params, controller, config_file, env, directory, self.ranks(params.train.backend))
        write_bytes_atomic(directory / SCRIPT_NAME, script.encode())

    def describe(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str]) -> list[str]:
        """The batch script, and how it is submitted."""
        directory = job_dir(config_file)
        submit = shlex.join(["sbatch", "--parsable", *params.slurm.sbatch_args, str(directory / SCRIPT_NAME)])
        script = batch_script(params, controller, config_file, env, directory, self.ranks(params.train.backend))
        return [f"slurm: {submit}, with {directory / SCRIPT_NAME}:", *script.splitlines()]

    def stop(self, hosts: list[str], config_file: Path) -> None:
        """Every job of this run cancelled and ended, by the ids its follower noted and by its run's job name (scancel:
        Slurm stops its ranks on every node)."""
        ids_file = job_dir(config_file) / JOB_IDS_FILE
        try:
            named = live_jobs(run_prefix(job_dir(config_file)))
        except SlurmError:  # slurmctld gone: the noted ids are all there is
            named = []
        for job_id in dict.fromkeys([*(ids_file.read_text().split() if ids_file.exists() else []), *named]):
            try:
                cancel(job_id)
            except SlurmError:  # slurmctld gone: nothing more can be done from here
                continue

    def listens(self, params: Params, controller: str | None) -> list[str]:
        """What the ranks open on the allocated nodes."""
        if controller and controller_spec(controller).rendezvous:
            return ["horovodrun's rendezvous (HTTP) on the job's first node, every interface; Gloo between the ranks "
                    "on the allocated nodes"]
        if controller:
            return ["Open MPI's TCP transport between the ranks on the allocated nodes, every interface"]
        return ["TensorFlow gRPC servers on the allocated nodes, every interface (TensorFlow binds 0.0.0.0)"]


class SlurmScheduler(Scheduler):
    """Slurm runs the job as its batch job (train.scheduler: slurm); `ranks` as for SlurmLauncher."""

    def __init__(self, ranks: Callable[[str], Launcher]) -> None:
        self.launcher: Launcher = SlurmLauncher(ranks)

    def refusal(self, params: Params) -> str | None:
        """What the batch script cannot run (tasks/launch/slurm/batch_script.py)."""
        return unsupported(params)

    def cluster_problem(self, params: Params, controller: str | None) -> str | None:
        """What the cluster's configuration says of the job (tasks/launch/slurm/preflight.py)."""
        return slurm_problem(params, controller)

    def gpus_per_node(self, params: Params) -> int:
        return params.slurm.gpus_per_node

    def at_np(self, params: Params, np: int) -> Params:
        """The job at np ranks: whole nodes of slurm.tasks_per_node ranks, or one node of fewer."""
        per_node = min(params.slurm.tasks_per_node, np)
        if np % per_node:
            raise ParamsError(f"np {np} is not a whole number of nodes of slurm.tasks_per_node {per_node}")
        shape = {"nodes": np // per_node, "tasks_per_node": per_node}
        return params.model_copy(update={"train": params.train.model_copy(update={"np": np}),
                                         "slurm": params.slurm.model_copy(update=shape)})

    def trial_slots(self, params: Params, parallel: int) -> dict[str, int]:
        """The ranks of `parallel` trials' jobs at once; Slurm finds their nodes."""
        return {"the Slurm cluster": params.train.np * parallel}
