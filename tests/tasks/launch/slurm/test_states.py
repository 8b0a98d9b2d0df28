"""Slurm's job states as ringflow reads them from `scontrol show job`, and the follower's lines about a job."""
from __future__ import annotations

import pytest

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


# job 3 of the test cluster's Slurm 22.05, running on h1, as `scontrol show job -o 3` printed it (whole): a name and
# a comment (`sbatch --comment`) that hold JobState and the other fields, before and after Slurm's own
NAME = "ringflow-x JobState=COMPLETED Restarts=7 ExitCode=0:0"
COMMENT = ("c JobState=FAILED Reason=None Dependency=(null) Requeue=1 Restarts=9 BatchFlag=1 Reboot=0 ExitCode=1:0 "
           "NodeList=h9")
HOSTILE = (
    f"JobId=3 JobName={NAME} UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 RunTime=00:00:01 TimeLimit=365-00:00:00 TimeMin=N/A SubmitTime=2026-11-28T04:06:47 "
    "EligibleTime=2026-11-28T04:06:47 AccrueTime=2026-11-28T04:06:47 StartTime=2026-11-28T04:06:48 "
    "EndTime=2027-11-28T04:06:48 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-28T04:06:48 "
    "Scheduler=Backfill Partition=debug AllocNode:Sid=localhost:5963 ReqNodeList=(null) ExcNodeList=(null) "
    "NodeList=h1 BatchHost=h1 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 "
    "MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) "
    f"Network=(null) Command=/tmp/sjt/s.sh WorkDir=/tmp/sjt Comment={COMMENT}  StdErr=/tmp/sjt/o-3.out "
    "StdIn=/dev/null StdOut=/tmp/sjt/o-3.out Power= \n")
# the same job as `scontrol show job 3` (no -o) printed it, and job 2's name and comment that hold line breaks
HOSTILE_LINES = (
    f"JobId=3 JobName={NAME}\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
    "   Priority=4294901757 Nice=0 Account=(null) QOS=(null)\n   JobState=RUNNING Reason=None Dependency=(null)\n"
    "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0\n   RunTime=00:00:01 TimeLimit=365-00:00:00 "
    "TimeMin=N/A\n   Partition=debug AllocNode:Sid=localhost:5963\n   ReqNodeList=(null) ExcNodeList=(null)\n"
    f"   NodeList=h1\n   BatchHost=h1\n   Command=/tmp/sjt/s.sh\n   WorkDir=/tmp/sjt\n   Comment={COMMENT}\n"
    "   StdErr=/tmp/sjt/o-3.out\n   StdIn=/dev/null\n   StdOut=/tmp/sjt/o-3.out\n   Power=\n   \n\n")
BROKEN_LINES = (
    "JobId=2 JobName=y\n   JobState=COMPLETED\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
    "   Priority=4294901758 Nice=0 Account=(null) QOS=(null)\n   JobState=RUNNING Reason=None Dependency=(null)\n"
    "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0\n   NodeList=h1\n   BatchHost=h1\n"
    "   Command=/tmp/sjt/s.sh\n   WorkDir=/tmp/sjt\n   Comment=c\n   JobState=FAILED z JobState=FAILED \n"
    "   StdErr=/tmp/sjt/o-2.out\n")


@pytest.mark.parametrize("shown", [HOSTILE, HOSTILE_LINES, BROKEN_LINES], ids=["one-line", "lines", "line-breaks"])
def test_the_state_is_slurms_own_field_whatever_a_name_or_comment_holds(shown: str) -> None:
    """A running job whose name and comment hold `JobState=COMPLETED`, `JobState=FAILED` and other fields is read
    as RUNNING on h1, not restarted, exit 0:0: each field where Slurm prints it, not its name's last in the text."""
    assert parse_job(shown) == JobState("RUNNING", "None", 0, "0:0", "h1")


def test_a_text_without_slurms_state_is_unknown() -> None:
    assert parse_job("JobId=3 JobName=x JobState=COMPLETED UserId=root(0)\n").state == "UNKNOWN"


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
