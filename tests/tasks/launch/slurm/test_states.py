"""Slurm's job states as ringflow reads them from `scontrol show job -o`, and the follower's lines about a job."""
from __future__ import annotations

from tasks.launch.slurm.states import (
    JobState,
    end_message,
    ended_line,
    parse_ended,
    parse_job,
    parse_submitted,
    submitted_line,
)

# a line as Slurm 22.05's `scontrol show job -o` printed it on the test cluster (cut)
RUNNING = ("JobId=15 JobName=ringflow-horovod UserId=root(0) GroupId=root(0) Priority=4294901746 JobState=RUNNING "
           "Reason=None Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:07 "
           "NodeList=h[1-2] BatchHost=h1 NumNodes=2 NumCPUs=2 NumTasks=2")
PENDING = "JobId=16 JobState=PENDING Reason=Resources Requeue=1 Restarts=0 ExitCode=0:0 NodeList=(null)"


def test_a_running_job_line_gives_its_state_restarts_and_nodes() -> None:
    job = parse_job(RUNNING)
    assert job == JobState("RUNNING", "None", 1, "0:0", "h[1-2]")
    assert not job.ended and not job.waiting


def test_a_pending_job_waits_and_says_why() -> None:
    job = parse_job(PENDING)
    assert job.waiting and job.reason == "Resources" and job.nodes == ""


def test_the_end_line_round_trips_and_says_whether_a_retry_may_pass() -> None:
    line = ended_line("15", JobState("TIMEOUT", exit_code="0:15"))
    assert parse_ended(line) == ("15", "TIMEOUT", "0:15", "it reached its time limit (slurm.time_limit)")
    assert end_message(*parse_ended(line)) == (  # type: ignore[misc]
        "Slurm job 15 ended TIMEOUT (exit 0:15): it reached its time limit (slurm.time_limit)", True)
    for state, retryable in [("PREEMPTED", True), ("NODE_FAIL", True), ("OUT_OF_MEMORY", False),
                             ("CANCELLED", False), ("NEVER_STARTED", False)]:
        assert end_message("1", state, "0:0", "why")[1] is retryable, state


def test_the_submitted_line_round_trips() -> None:
    assert parse_submitted(submitted_line("42")) == "42" and parse_submitted("slurm: job 42 RUNNING") is None


def test_the_follower_may_say_why_a_job_ended_in_its_own_words() -> None:
    line = ended_line("4", JobState("CANCELLED"), "cancelled by scancel: the train step was stopped")
    assert line == "slurm: job 4 ended CANCELLED (exit 0:0): cancelled by scancel: the train step was stopped"
    assert parse_ended(line) == ("4", "CANCELLED", "0:0", "cancelled by scancel: the train step was stopped")
