"""Slurm's job states as ringflow reads them, and the lines the follower prints about a job (written and read here
only): submitted, each change of state, and its end."""
from __future__ import annotations

import re
from dataclasses import dataclass

NEVER_STARTED = "NEVER_STARTED"  # ringflow's word: the job waited in the queue past slurm.pending_timeout_minutes
# a job's end that running it again may pass: the retry (or Slurm's requeue) resumes from the last checkpoint
RETRYABLE_ENDS = ("TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE")
ENDS = ("COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", *RETRYABLE_ENDS)
WHY = {"TIMEOUT": "it reached its time limit (slurm.time_limit)", "PREEMPTED": "Slurm preempted it",
       "NODE_FAIL": "one of its nodes failed", "BOOT_FAIL": "a node failed to boot",
       "DEADLINE": "it reached its deadline", "CANCELLED": "it was cancelled (scancel, or an administrator)",
       "OUT_OF_MEMORY": "a rank ran out of memory: lower train.batch_size or input.image_size",
       "FAILED": "a rank failed", "COMPLETED": "it completed",
       NEVER_STARTED: "it did not start within slurm.pending_timeout_minutes and was cancelled"}
PENDING_TIMEOUT_EXIT = 3  # the follower's exit when the job never started within slurm.pending_timeout_minutes

_SUBMITTED = re.compile(r"^slurm: submitted batch job (?P<id>\d+)")
_ENDED = re.compile(r"^slurm: job (?P<id>\d+) ended (?P<state>[A-Z_]+) \(exit (?P<exit>\d+:\d+)\): (?P<why>.*)$")
_FIELD = re.compile(r"(?P<key>[A-Za-z:/]+)=(?P<value>\S*)")


@dataclass(frozen=True)
class JobState:
    """What `scontrol show job -o` says of a job: its state, why it waits, restarts, exit code, nodes."""
    state: str
    reason: str = ""
    restarts: int = 0
    exit_code: str = "0:0"
    nodes: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDS

    @property
    def waiting(self) -> bool:
        """No rank of the job runs (queued, requeued, completing, suspended): none can be silent."""
        return not self.ended and self.state != "RUNNING"


def parse_job(line: str) -> JobState:
    """A job's one line from `scontrol show job -o ID`."""
    fields = {match["key"]: match["value"] for match in _FIELD.finditer(line)}
    nodes = fields.get("NodeList", "")
    return JobState(fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""), int(fields.get("Restarts", 0) or 0),
                    fields.get("ExitCode", "0:0"), "" if nodes == "(null)" else nodes)


def submitted_line(job_id: str) -> str:
    return f"slurm: submitted batch job {job_id}"


def parse_submitted(line: str) -> str | None:
    found = _SUBMITTED.match(line)
    return found["id"] if found else None


def ended_line(job_id: str, job: JobState, why: str | None = None) -> str:
    """The follower's last line about a job: its end, and why (Slurm's word for it unless `why` is given)."""
    waited = f" (it waited for {job.reason})" if job.state == NEVER_STARTED and job.reason else ""
    because = why or WHY.get(job.state, job.reason)
    return f"slurm: job {job_id} ended {job.state} (exit {job.exit_code}): {because}{waited}"


def parse_ended(line: str) -> tuple[str, str, str, str] | None:
    """(job id, state, exit, why) of a job's end line, else None."""
    found = _ENDED.match(line)
    return (found["id"], found["state"], found["exit"], found["why"]) if found else None


def end_message(job_id: str, state: str, exit_code: str, why: str) -> tuple[str, bool]:
    """One line for a job's end that is not a rank's failure, and whether a retry may pass."""
    return f"Slurm job {job_id} ended {state} (exit {exit_code}): {why}", state in RETRYABLE_ENDS

