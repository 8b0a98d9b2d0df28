"""The Slurm commands ringflow runs on this machine (the head or login node), each with a time limit and a one-line
error: submit, ask a job's state, cancel, and what the cluster offers."""
from __future__ import annotations

import shutil
import subprocess
import time

from tasks.launch.slurm.states import JobState, parse_job

SRUN = ["srun", "--label", "--kill-on-bad-exit=1", "--distribution=block"]  # a job step of tagged, block-placed ranks
MPI_PLUGINS = ("pmix", "pmi2")  # what Open MPI and Horovod start under, in the order the batch script prefers them
COMMAND_SECONDS = 60  # slurmctld answers in well under a second; a minute means it is down or unreachable


class SlurmError(RuntimeError):
    """A Slurm command failed; str() is one line (the command and what it said)."""


def slurm(command: list[str], timeout: float = COMMAND_SECONDS, check: bool = True) -> subprocess.CompletedProcess:
    """Run a Slurm command; SlurmError naming it and its last line of error when it fails (check) or hangs."""
    if shutil.which(command[0]) is None:
        raise SlurmError(f"{command[0]} is not on PATH: this machine is not a Slurm head or login node")
    try:
        # in a session of its own: a second Ctrl-C in the terminal does not end the scancel the first one started
        # umask 077: sbatch hands its umask to the job (SLURM_UMASK), whose slurm-<id>.out then only its user reads
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              start_new_session=True, umask=0o077)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{command[0]} did not answer in {timeout:.0f} s (is slurmctld up?)") from None
    if check and done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise SlurmError(f"{' '.join(command[:2])}: {said}")
    return done


def submit(script: str, sbatch_args: list[str], name: str) -> str:
    """Submit a batch script under a job name of ringflow's (after the user's arguments: it wins); its job id
    (`sbatch --parsable` prints `id[;cluster]`)."""
    return slurm(["sbatch", "--parsable", *sbatch_args, f"--job-name={name}", script]).stdout.strip().split(";")[0]


def live_jobs(name_prefix: str) -> list[str]:
    """This user's jobs that Slurm still holds (queued, running, suspended...) whose name starts with the prefix."""
    listed = slurm(["squeue", "--noheader", "--me", "--format=%i|%j"]).stdout.splitlines()
    return [job_id for job_id, _, name in (line.partition("|") for line in listed) if name.startswith(name_prefix)]


def cancel_named(name: str) -> None:
    """scancel every job of this user of that name (one whose id was never learned: an sbatch that timed out)."""
    slurm(["scancel", "--me", f"--name={name}"], check=False)


def test_submit(script: str, sbatch_args: list[str]) -> str | None:
    """Whether Slurm would take the script (`sbatch --test-only`, nothing submitted): None, or its refusal."""
    done = slurm(["sbatch", "--test-only", *sbatch_args, script], check=False)
    if done.returncode == 0:
        return None
    return (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]


def job_state(job_id: str) -> JobState:
    """A job's state from slurmctld (`scontrol show job`: no accounting needed; kept for MinJobAge after its end),
    else from the accounting database where there is one (`sacct`)."""
    shown = slurm(["scontrol", "show", "job", "-o", job_id], check=False)
    if shown.returncode == 0:
        return parse_job(shown.stdout)
    accounted = slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"], check=False)
    if accounted.returncode == 0 and accounted.stdout.strip():
        state, exit_code = accounted.stdout.strip().splitlines()[0].split("|")[:2]
        return JobState(state.split()[0], exit_code=exit_code)  # "CANCELLED by 0" -> CANCELLED
    said = (shown.stderr.strip() or shown.stdout.strip()).splitlines()
    raise SlurmError(f"scontrol show job {job_id}: {said[-1] if said else f'exit {shown.returncode}'} (and no "
                     f"accounting to ask)")


def cancel(job_id: str, wait_seconds: float = 60) -> JobState | None:
    """scancel the job and wait (bounded) for its end; its last state (None: Slurm no longer knows it)."""
    slurm(["scancel", job_id], check=False)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            state = job_state(job_id)
        except SlurmError:
            return None
        if state.ended or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def mpi_plugins() -> list[str]:
    """The MPI plugins srun offers (`srun --mpi=list`)."""
    done = slurm(["srun", "--mpi=list"])
    offered = {line.strip() for line in (done.stdout + done.stderr).splitlines()}
    return [plugin for plugin in MPI_PLUGINS if plugin in offered]
