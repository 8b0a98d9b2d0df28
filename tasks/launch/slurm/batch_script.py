"""The batch script of a training job under Slurm: readable, and what the train step submits (a user can `sbatch`
it by hand). Pure: it contacts no host and asks Slurm nothing; the script asks the allocation at run time.

How the ranks start is the backend's launcher's to say (its `in_allocation`, tasks/launch/launchers/): Horovod
with MPI by `srun` directly (PMIx, or PMI-2, whichever srun offers); Horovod with Gloo by horovodrun inside the
allocation over its nodes (Gloo needs horovodrun's rendezvous); multiworker by `srun`, one worker per task, after a
first step picked ports on each node; a one-process backend by `srun` on one node. Slurm's notice before the time
limit (`--signal=B:USR1@N`) is passed to the ranks, which stop after the report or checkpoint in progress; the job
then asks to be requeued.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from tasks.launch.environment import JOB_DEFAULTS
from tasks.launch.launchers.base import Launcher
from tasks.params import Params
from tasks.paths import ROOT
from trainer.backend_specs import backend_spec
from trainer.choices import controller_spec
from trainer.config import CONTROL_CHARACTER
from trainer.protocol import HEARTBEAT_ENV, METRICS_SPOOL_ENV

SCRIPT_NAME = "job.sh"
OUTPUT_PATTERN = "slurm-%j.out"  # in the job's directory: every rank's lines, tagged by rank (srun --label)
STOPPED_ON_NOTICE_EXIT = 75  # the ranks stopped on Slurm's notice and the job may not be requeued: retry it
# what the ranks need from the train step's environment, written into the script (nothing secret: no rank needs a
# tracking setting)
EXPORTED = ("PYTHONPATH", "PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS", METRICS_SPOOL_ENV,
            HEARTBEAT_ENV, *JOB_DEFAULTS)


def unsupported(params: Params) -> str | None:
    """Why this job cannot run as a Slurm job, in one line (None: it can)."""
    spec, slurm = backend_spec(params.train.backend), params.slurm
    if spec.with_servers:
        return f"backend {spec.name} does not run under Slurm yet: use horovod, horovod-tape or multiworker"
    if params.train.elastic:
        return "train.elastic does not run under Slurm yet: the allocation's nodes are fixed"
    if spec.single_process and slurm.tasks != 1:
        return (f"backend {spec.name} is one process: set slurm.nodes and slurm.tasks_per_node to 1 (got "
                f"{slurm.nodes} x {slurm.tasks_per_node})")
    return None


def sbatch_options(params: Params, job_dir: Path) -> list[str]:
    """The job's #SBATCH options: its shape, where it runs, its output, requeue and the notice."""
    slurm = params.slurm
    options = [f"--job-name=ringflow-{params.train.backend}", f"--nodes={slurm.nodes}",
               f"--ntasks-per-node={slurm.tasks_per_node}", f"--cpus-per-task={slurm.cpus_per_task}"]
    options += [f"--gpus-per-node={slurm.gpus_per_node}"] if slurm.gpus_per_node else []
    named = {"partition": slurm.partition, "account": slurm.account, "qos": slurm.qos, "time": slurm.time_limit}
    options += [f"--{key}={value}" for key, value in named.items() if value]
    options += [f"--output={job_dir / OUTPUT_PATTERN}", "--open-mode=append",
                "--requeue" if slurm.requeue else "--no-requeue"]
    options += [f"--signal=B:USR1@{slurm.notice_seconds}"] if slurm.notice_seconds else []
    return options


def rank_start(params: Params, controller: str | None, config_file: Path, job_dir: Path,
               ranks: Launcher) -> list[str]:
    """The script's lines that start the ranks (in the background: the notice's trap runs while they do), as the
    backend's launcher (`ranks`) starts them inside an allocation."""
    lines = ranks.in_allocation(params, controller, config_file, job_dir)
    if lines is None:
        raise ValueError(f"backend {params.train.backend} does not run under Slurm")
    return lines


NOTICE_TRAP = """\
noticed=0
notice() {  # Slurm's notice before the time limit: the ranks stop after the report or checkpoint in progress
  noticed=1
  echo "ringflow: job $SLURM_JOB_ID got Slurm's notice (SIGUSR1): stopping the ranks after their checkpoint"
  [ -n "${ranks:-}" ] && kill -%s "$ranks"
}
trap notice USR1"""

WAIT_AND_END = """\
ranks=$!
wait "$ranks"; code=$?
while kill -0 "$ranks" 2>/dev/null; do wait "$ranks"; code=$?; done  # a trapped signal ends a wait early
if [ "$noticed" = 1 ]; then
  echo "ringflow: job $SLURM_JOB_ID stopped on Slurm's notice; it resumes from its last checkpoint when run again"
  if [ "${SLURM_RESTART_COUNT:-0}" -ge %d ]; then  # slurm.max_requeues: the step's retry, if any, decides
    echo "ringflow: job $SLURM_JOB_ID was requeued ${SLURM_RESTART_COUNT:-0} times (slurm.max_requeues): not again"
    exit %d
  fi
  scontrol requeue "$SLURM_JOB_ID" 2>/dev/null || exit %d
fi
exit "$code\""""


def comment(text: str) -> str:
    """A comment line whatever the text holds (params refuse control characters; this holds even without them):
    a control character is written as its escape, so no value can end the line and start a command."""
    return "# " + CONTROL_CHARACTER.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def batch_script(params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                 job_dir: Path, ranks: Launcher) -> str:
    """The whole batch script of the job whose processes read `config_file`, its ranks started as `ranks` (the
    backend's launcher) starts them in an allocation; its output goes to `job_dir`."""
    spec = backend_spec(params.train.backend)
    exports = [f"export {key}={shlex.quote(env[key])}" for key in EXPORTED if key in env]
    by_horovodrun = spec.horovod and controller is not None and controller_spec(controller).rendezvous
    lines = ["#!/bin/bash",
             f"# ringflow: a {params.train.backend} training job of {params.train.np} ranks "
             f"({params.slurm.nodes} nodes x {params.slurm.tasks_per_node}), written by the train step.",
             comment(f"Submitted with: sbatch --parsable {shlex.join(params.slurm.sbatch_args)} "
                     f"{job_dir / SCRIPT_NAME}".replace("  ", " ")),
             *[f"#SBATCH {option}" for option in sbatch_options(params, job_dir)],
             "set -u", f"cd {shlex.quote(str(ROOT))}", *exports,
             # srun passes USR1 on to every task; horovodrun stops on TERM
             NOTICE_TRAP % ("TERM" if by_horovodrun else "USR1"),
             'echo "ringflow: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST (restart ${SLURM_RESTART_COUNT:-0})"',
             *rank_start(params, controller, config_file, job_dir, ranks),
             WAIT_AND_END % (params.slurm.max_requeues, STOPPED_ON_NOTICE_EXIT, STOPPED_ON_NOTICE_EXIT)]
    return "\n".join(lines) + "\n"
