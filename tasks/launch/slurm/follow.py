"""Follow one Slurm job from the head node, as a process of the train step (so the launcher streams, watches and
stops it like any other): submit the batch script, print every rank's line from the job's output file (srun's
`N: ` label made the launcher's `[N]<stdout>:` tag) and each change of the job's state, and end as the job ends.
Stopped (the flow run cancelled, Ctrl-C, the job's time limit), it cancels the job first. While the job waits in
the queue it beats for its ranks (no rank exists that could be silent) and gives up after the pending timeout; a job
that started and is then held, suspended or stuck (requeued and held, SPECIAL_EXIT, COMPLETING) gets no heartbeat
and is cancelled after the same timeout; one requeued more than slurm.max_requeues times is cancelled.

    python -m tasks.launch.slurm.follow SCRIPT OUTPUT_DIR RANKS PENDING_MINUTES MAX_REQUEUES [SBATCH_ARG ...]
"""
from __future__ import annotations

import re
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from tasks.launch.output.diagnosis import tagged
from tasks.launch.slurm.commands import (
    COMMAND_SECONDS,
    SlurmError,
    cancel,
    cancel_named,
    job_state,
    live_jobs,
    submit,
)
from tasks.launch.slurm.states import (
    NEVER_STARTED,
    PENDING_TIMEOUT_EXIT,
    JobState,
    ended_line,
    requeued_line,
    submitted_line,
)
from trainer.protocol import HEARTBEAT_LINE

SRUN_LABEL = re.compile(r"^\s*(?P<rank>\d+): ")  # srun --label
JOB_IDS_FILE = "jobs"  # in the output directory: every job id submitted (the launcher cancels them when it stops)
POLL_SECONDS = 1.0
BEAT_SECONDS = 5.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(Exception):
    """The follower was told to stop (its signal's number)."""


def _raise_stopped(signum: int, frame: Any) -> None:
    """The first stop signal raises; any later one (Ctrl-C pressed twice, the launcher's TERM after Ctrl-C) waits
    for the cancel it started."""
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Stopped(signum)


def rank_line(line: str) -> str:
    """srun's labelled line as the launcher's rank line; any other line (horovodrun's own tags, the script's) as is."""
    return SRUN_LABEL.sub(lambda found: tagged(found["rank"], ""), line, count=1)


class OutputTail:
    """The new whole lines of the job's output file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, ""

    def lines(self) -> list[str]:
        try:
            with self.path.open("r", errors="replace") as handle:
                handle.seek(self.offset)
                text = handle.read()
                self.offset = handle.tell()
        except FileNotFoundError:
            return []
        complete, newline, self.partial = (self.partial + text).rpartition("\n")
        return [rank_line(line) for line in complete.split("\n")] if newline else []


def relay(line: str, out: TextIO = sys.stdout) -> None:
    """A line for the launcher, which reads the follower's output as it reads a rank's (its protocol lines)."""
    print(line, file=out, flush=True)


def state_change(job_id: str, before: JobState | None, now: JobState) -> str | None:
    """A line when the job's state (or its restarts) changed, else None."""
    if before is not None and (before.state, before.restarts) == (now.state, now.restarts):
        return None
    if before is not None and now.restarts > before.restarts:
        return requeued_line(job_id, now.restarts)
    where = f" on {now.nodes}" if now.state == "RUNNING" else f" ({now.reason})" if now.reason not in ("", "None") \
        else ""
    return f"slurm: job {job_id} {now.state}{where}"


def current_state(job_id: str, patience: float = COMMAND_SECONDS) -> JobState:
    """The job's state; a slurmctld that does not answer (restarting, say) is asked again for `patience` seconds."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return job_state(job_id)
        except SlurmError:
            if time.monotonic() > deadline:
                raise
            time.sleep(POLL_SECONDS * 2)


QUEUED = ("PENDING", "CONFIGURING")  # waiting for nodes: no rank exists yet that could be silent


@dataclass
class Patience:
    """How long the follower waits for a job that runs no rank, and for how many requeues."""
    ranks: int
    pending_seconds: float
    max_requeues: int
    submitted: float = field(default_factory=lambda: time.monotonic())
    started: bool = False
    idle_since: float | None = None  # since when a job that had started has run no rank
    beaten: float = 0.0

    def saw(self, job: JobState) -> None:
        if job.state == "RUNNING":
            self.started, self.idle_since = True, None
        elif self.started and self.idle_since is None:
            self.idle_since = time.monotonic()

    def given_up(self, job: JobState) -> JobState | None:
        """The job as its end line names it when the follower gives up on it now, else None."""
        if job.restarts > self.max_requeues:
            return replace(job, state="REQUEUED", reason=f"requeued {job.restarts} times, more than "
                                                         f"slurm.max_requeues ({self.max_requeues})")
        since = self.idle_since if self.started else self.submitted
        if not job.waiting or since is None or time.monotonic() - since <= self.pending_seconds:
            return None
        if not self.started:
            return replace(job, state=NEVER_STARTED)
        reason = f" ({job.reason})" if job.reason not in ("", "None") else ""
        return replace(job, state="STUCK", reason=f"it had started, then was {job.state}{reason} for more than "
                                                  "slurm.pending_timeout_minutes")

    def beat_now(self, job: JobState) -> bool:
        """Heartbeats for the ranks only while the job is queued for nodes (not held, not suspended)."""
        if job.state not in QUEUED or "held" in job.reason.lower() or time.monotonic() - self.beaten < BEAT_SECONDS:
            return False
        self.beaten = time.monotonic()
        return True


def follow(job_id: str, tail: OutputTail, patience: Patience) -> int:
    """Print the job's lines and states until it ends; the follower's exit code (0: COMPLETED)."""
    before = None
    while True:
        now = current_state(job_id)
        if not now.ended and (change := state_change(job_id, before, now)) is not None:
            relay(change)
        for line in tail.lines():
            relay(line)
        before = now
        patience.saw(now)
        if now.ended:
            time.sleep(POLL_SECONDS)  # the last writes of the job's steps
            for line in tail.lines() + ([tail.partial] if tail.partial else []):
                relay(line)
            relay(ended_line(job_id, now))
            return 0 if now.state == "COMPLETED" else 1
        if patience.beat_now(now):
            for rank in range(patience.ranks):
                relay(tagged(str(rank), HEARTBEAT_LINE))
        if (given_up := patience.given_up(now)) is not None:
            cancel(job_id)
            relay(ended_line(job_id, given_up, None if given_up.state == NEVER_STARTED else given_up.reason))
            return PENDING_TIMEOUT_EXIT
        time.sleep(POLL_SECONDS)


def run_prefix(output_dir: Path) -> str:
    """The start of the job names of one run (its folder's name, the MLflow run id): found without an id."""
    return f"ringflow-{output_dir.parent.name}-"


def attempt_name(output_dir: Path) -> str:
    """The job name of this attempt: the run's prefix and the attempt's number (1 + the jobs submitted before)."""
    ids_file = output_dir / JOB_IDS_FILE
    return f"{run_prefix(output_dir)}{len(ids_file.read_text().split()) + 1 if ids_file.exists() else 1}"


def cancel_earlier_jobs(output_dir: Path) -> None:
    """A job of this run that is still live (its launcher was killed, so no one cancelled it) is cancelled before
    a resume or a retry submits: never two incarnations writing the same checkpoints and MLflow run."""
    for job_id in live_jobs(run_prefix(output_dir)):
        cancel(job_id)
        relay(f"slurm: job {job_id} of this run was still live (its launcher was stopped without cancelling it): "
            "cancelled before submitting again")


def submit_and_note(script: str, sbatch_args: list[str], output_dir: Path, name: str) -> str:
    """Submit the job; its id, noted where the launcher's stop finds it. An sbatch that timed out may still have
    queued it: then it is cancelled by its name."""
    try:
        job_id = submit(script, sbatch_args, name)
    except SlurmError:
        cancel_named(name)
        raise
    with (output_dir / JOB_IDS_FILE).open("a") as ids:
        ids.write(job_id + "\n")
    return job_id


def main(argv: list[str]) -> int:
    script, output_dir, ranks, pending_minutes, max_requeues, *sbatch_args = argv
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stopped)
    job_id = None
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # a stop waits until the id is known here and noted
        cancel_earlier_jobs(Path(output_dir))
        job_id = submit_and_note(script, sbatch_args, Path(output_dir), attempt_name(Path(output_dir)))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        relay(submitted_line(job_id))
        return follow(job_id, OutputTail(Path(output_dir) / f"slurm-{job_id}.out"),
                      Patience(int(ranks), float(pending_minutes) * 60, int(max_requeues)))
    except (Stopped, BrokenPipeError) as stop:  # told to stop, or the launcher is gone (its pipe broken)
        if job_id is not None:
            last = cancel(job_id) or JobState("CANCELLED")
            relay_if_heard(ended_line(job_id, last, "cancelled by scancel: the train step was stopped (Ctrl-C, the "
                                                  "flow run cancelled, or train.timeout_minutes)"))
        return 128 + int(stop.args[0]) if isinstance(stop, Stopped) else 1
    except SlurmError as error:
        relay(f"slurm: {'the job was not submitted: ' if job_id is None else ''}{error}")
        return 2


def relay_if_heard(line: str) -> None:
    """A last line, when someone still reads this process's output."""
    try:
        relay(line)
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
