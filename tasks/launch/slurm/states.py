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
_REQUEUED = re.compile(r"^slurm: job (?P<id>\d+) requeued \(restart (?P<restart>\d+)\)")
_ENDED = re.compile(r"^slurm: job (?P<id>\d+) ended (?P<state>[A-Z_]+) \(exit (?P<exit>\d+:\d+)\): (?P<why>.*)$")
# Slurm prints a job's JobState with its Reason right after it, once, after the job's name and before every other text
# a user gives (command, working directory, comment, output paths); a name or a comment may hold `JobState=` too
_STATE = re.compile(r"(?:^|\s)JobState=(?P<state>[A-Z_]+)\s+Reason=(?P<reason>\S*)(?=\s|$)")
_AFTER_STATE = {key: re.compile(rf"\s{key}=(?P<value>\S*)(?=\s|$)") for key in ("Restarts", "ExitCode", "NodeList")}


@dataclass(frozen=True)
class JobState:
    """What `scontrol show job` says of a job: its state, why it waits, restarts, exit code, nodes."""
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


def parse_job(text: str) -> JobState:
    """A job's state from what `scontrol show job [-o] ID` printed: each field read where Slurm prints it (the first
    JobState followed by its Reason, then the first Restarts, ExitCode and NodeList after it), never from the text
    of a name, comment or path that holds `JobState=` (UNKNOWN when Slurm said no state)."""
    found = _STATE.search(text)
    if found is None:
        return JobState("UNKNOWN")
    fields = {key: after[1] for key, pattern in _AFTER_STATE.items() if (after := pattern.search(text, found.end()))}
    nodes = fields.get("NodeList", "")
    return JobState(found["state"], found["reason"], int(fields.get("Restarts") or 0), fields.get("ExitCode") or "0:0",
                    "" if nodes == "(null)" else nodes)


def submitted_line(job_id: str) -> str:
    return f"slurm: submitted batch job {job_id}"


def parse_submitted(line: str) -> str | None:
    found = _SUBMITTED.match(line)
    return found["id"] if found else None


def requeued_line(job_id: str, restarts: int) -> str:
    """The follower's line when Slurm has requeued the job: its ranks start again, in a new attempt."""
    return f"slurm: job {job_id} requeued (restart {restarts}): it resumes from its last checkpoint"


def parse_requeued(line: str) -> bool:
    return _REQUEUED.match(line) is not None


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

