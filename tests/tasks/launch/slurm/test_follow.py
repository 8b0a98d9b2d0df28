"""The follower's pieces that need no Slurm: srun's labels made rank tags, the output file read in whole lines as
it grows, and the lines for a job's changes of state."""
from __future__ import annotations

from pathlib import Path

from tasks.launch.slurm.follow import OutputTail, rank_line, state_change
from tasks.launch.slurm.states import JobState


def test_srun_labels_become_the_launchers_rank_tags_and_other_lines_stay() -> None:
    assert rank_line("1: epoch 3: loss=0.2") == "[1]<stdout>:epoch 3: loss=0.2"
    assert rank_line(" 12: rank 12 of 16 on gpu07") == "[12]<stdout>:rank 12 of 16 on gpu07"
    assert rank_line("[0]<stdout>:rank 0 of 2 on h1") == "[0]<stdout>:rank 0 of 2 on h1"  # horovodrun's own tag
    assert rank_line("srun: error: h2: task 1: Exited with exit code 1") == \
        "srun: error: h2: task 1: Exited with exit code 1"


def test_the_output_is_read_in_whole_lines_as_the_file_grows(tmp_path: Path) -> None:
    output = tmp_path / "slurm-7.out"
    tail = OutputTail(output)
    assert tail.lines() == []  # not written yet
    output.write_text("0: first\n1: sec")
    assert tail.lines() == ["[0]<stdout>:first"]
    with output.open("a") as handle:
        handle.write("ond\n\n")
    assert tail.lines() == ["[1]<stdout>:second", ""] and tail.lines() == []


def test_changes_of_state_and_requeues_are_said_once() -> None:
    pending, running = JobState("PENDING", "Priority"), JobState("RUNNING", nodes="h[1-2]")
    assert state_change("7", None, pending) == "slurm: job 7 PENDING (Priority)"
    assert state_change("7", pending, running) == "slurm: job 7 RUNNING on h[1-2]"
    assert state_change("7", running, running) is None
    requeued = JobState("PENDING", "BeginTime", restarts=1)
    assert state_change("7", running, requeued) == \
        "slurm: job 7 requeued (restart 1): it resumes from its last checkpoint"


def test_a_job_that_cannot_be_submitted_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.helpers import ROOT
    env = dict(os.environ, PATH="/nonexistent", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tasks.launch.slurm.follow", str(tmp_path / "job.sh"), str(tmp_path),
                           "2", "1", "3"], env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "slurm: the job was not submitted: squeue is not on PATH: this "
                                                 "machine is not a Slurm head or login node\n")
    assert not (tmp_path / "jobs").exists()


def test_a_job_that_runs_no_rank_is_waited_for_within_bounds(monkeypatch) -> None:
    """Queued: heartbeats for its ranks, given up after the pending timeout (NEVER_STARTED). Started, then held,
    suspended or stuck: no heartbeat, given up after the same timeout naming Slurm's state and reason. Requeued more
    than slurm.max_requeues times: given up at once."""
    import time

    from tasks.launch.slurm.follow import Patience
    from tasks.launch.slurm.states import JobState
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    patience = Patience(ranks=2, pending_seconds=60, max_requeues=1)
    queued = JobState("PENDING", "Resources")
    patience.saw(queued)
    assert patience.beat_now(queued) and patience.given_up(queued) is None
    clock[0] += 61
    assert patience.given_up(queued).state == "NEVER_STARTED"  # type: ignore[union-attr]
    patience = Patience(ranks=2, pending_seconds=60, max_requeues=1)
    patience.saw(JobState("RUNNING"))
    for stuck in (JobState("SUSPENDED"), JobState("PENDING", "launch_failed_requeued_held", restarts=1),
                  JobState("PENDING", "JobHeldAdmin", restarts=1), JobState("COMPLETING")):
        patience.idle_since = None
        patience.saw(stuck)
        clock[0] += 5
        assert not patience.beat_now(stuck)  # no rank runs, none is made up
        assert patience.given_up(stuck) is None
        clock[0] += 60
        given_up = patience.given_up(stuck)
        assert given_up is not None and given_up.state == "STUCK" and stuck.state in given_up.reason
    assert patience.given_up(JobState("PENDING", "BeginTime", restarts=2)).reason == (  # type: ignore[union-attr]
        "requeued 2 times, more than slurm.max_requeues (1)")
