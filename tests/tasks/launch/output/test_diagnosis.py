"""A failed job explained in one line from what horovodrun printed: rank, host, exit code or signal, cause."""
from __future__ import annotations

from tasks.launch.output.diagnosis import (
    JobReport,
    RankFailed,
    RankOutput,
    horovodrun_line,
    is_heartbeat,
    tagged,
    untagged,
)

HOSTS = {"0": "h1", "1": "h2"}


def explain(lines: list[str], oom_kills: int = 0, code: int = 1,
            oom_killed: frozenset[int] | None = None) -> tuple[str, bool]:
    output = RankOutput(HOSTS)
    for line in lines:
        output.add(line)
    failure = output.failure(JobReport(code, None, True, oom_kills, 10.0, oom_killed))
    return str(failure), failure.retryable


def test_the_rank_killed_first_is_named_not_the_one_the_launcher_terminated() -> None:
    lines = ["[0]<stdout>:epoch 1: loss=0.5", "Process 1 exit with status code 137.",
             "Terminating remaining workers after failure of Process 1.", "Process 0 exit with status code 143."]
    assert explain(lines) == ("rank 1 on h2 was killed by signal SIGKILL (exit 137)", True)


def test_a_kill_while_the_kernel_killed_for_memory_is_out_of_memory_and_final() -> None:
    lines = ["Process 0 exit with status code 137."]
    assert explain(lines, oom_kills=1) == (
        "rank 0 on h1 was killed by the out-of-memory killer (exit 137, SIGKILL): lower train.batch_size or "
        "input.image_size", False)


def test_a_kill_while_the_kernel_killed_another_process_for_memory_is_a_kill() -> None:
    """Another process ended by the out-of-memory killer during the job (a job beside it) makes a rank that was
    sent SIGKILL no out-of-memory case, when the kernel log names the processes it ended."""
    lines = ["[0]<stdout>:rank 0 of 2 on h1 pid 4321", "[1]<stdout>:rank 1 of 2 on h2 pid 4322",
             "Process 1 exit with status code 137."]
    assert explain(lines, oom_kills=1, oom_killed=frozenset({999})) == (
        "rank 1 on h2 was killed by signal SIGKILL (exit 137)", True)
    assert explain(lines, oom_kills=1, oom_killed=frozenset({4322}))[1] is False


def test_the_launcher_refused_before_any_rank_spoke_is_launched_again_but_not_once_ranks_ran() -> None:
    """Horovod's interface discovery (the launcher's services on each host) refused on a busy host: nothing has
    trained, so the job is launched again; the same error once a rank has spoken is only retryable."""
    def failure(lines: list[str]) -> RankFailed:
        output = RankOutput(HOSTS)
        for line in lines:
            output.add(line)
        return output.failure(JobReport(1, None, True, 0, 10.0))
    refused = "ConnectionRefusedError: [Errno 111] Connection refused"
    alone = failure(["Traceback (most recent call last):", refused])
    assert str(alone) == f"the launcher failed (exit 1): {refused}" and alone.launch_again and alone.retryable
    after_ranks = failure(["[0]<stdout>:rank 0 of 2 on h1 pid 17", refused])
    assert after_ranks.retryable and not after_ranks.launch_again
    assert not failure(["ValueError: no such option"]).launch_again
    timed_out = failure(["RuntimeError: Timed out waiting for the tasks to start"])  # as long again: not launched
    assert timed_out.retryable and not timed_out.launch_again


def test_an_exception_in_a_rank_is_quoted_and_not_retried_unless_it_is_the_network() -> None:
    bug = ["[1]<stderr>:ValueError: shapes (3,) and (4,) not aligned", "Process 1 exit with status code 1."]
    assert explain(bug) == ("rank 1 on h2 failed (exit 1): ValueError: shapes (3,) and (4,) not aligned", False)
    network = ["[0]<stderr>:RuntimeError: Gloo connection closed by peer", "Process 0 exit with status code 1."]
    assert explain(network)[1] is True


def test_a_graph_error_is_quoted_by_its_type_and_cause_past_the_stack_of_its_node() -> None:
    """TensorFlow's error from a training step: a heading that says only "Graph execution error:", the stack where
    the node was defined (longer than the lines kept of a rank), the cause, an afterword, the node."""
    stack = [f"[1]<stderr>:  File \"/site-packages/tf_keras/engine/training.py\", line {n}, in step" for n in range(60)]
    lines = ["[1]<stderr>:tensorflow.python.framework.errors_impl.UnavailableError: Graph execution error:",
             "[1]<stderr>:", "[1]<stderr>:Detected at node while/div_no_nan/CollectiveReduceV2 defined at (most "
             "recent call last):", *stack,
             "[1]<stderr>:Collective ops is aborted by: cluster check alive failed, /job:worker/replica:0/task:0 "
             "is down",
             "[1]<stderr>:The error could be from a previous operation. Restart your program to reset.",
             "[1]<stderr>:\t [[{{node while/div_no_nan/CollectiveReduceV2}}]] [Op:__inference_train_function_2860]",
             "Process 1 exit with status code 1."]
    assert explain(lines) == ("rank 1 on h2 failed (exit 1): UnavailableError: Collective ops is aborted by: cluster "
                              "check alive failed, /job:worker/replica:0/task:0 is down", True)


def test_horovods_stall_report_names_the_missing_rank() -> None:
    lines = ["[0]<stderr>:W1123 stall_inspector.cc:107] One or more tensors were submitted to be reduced",
             "[0]<stderr>:Missing ranks:", "[0]<stderr>:1: [DistributedAdam_Allreduce/cond/HorovodAllreduce_0]",
             "Process 0 exit with status code 1."]
    message, retryable = explain(lines)
    assert message.startswith("rank 1 on h2 stalled: Horovod shut the job down") and retryable


def test_a_peer_that_went_silent_is_named_from_the_ranks_that_waited_for_it() -> None:
    lines = ["[0]<stderr>:[2026-11-24 00:23:15: E operations.cc:697] [0]: Horovod background loop uncaught exception: "
             "[gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 30000ms for send operation to complete",
             "[0]<stderr>:Horovod has been shut down.", "Process 0 exit with status code 1."]
    assert explain(lines) == ("rank 1 on h2 stopped responding: rank 0 on h1 waited 30 s for it and gave up (a frozen "
                              "process or an unreachable host)", True)


def test_mpiruns_tags_read_as_horovodruns() -> None:
    assert horovodrun_line("[1,0]<stdout>:epoch 1: loss=0.5[1,0]<stdout>:") == "[0]<stdout>:epoch 1: loss=0.5"
    assert horovodrun_line("[7,12]<stderr>:ValueError: x") == "[12]<stderr>:ValueError: x"
    assert horovodrun_line("mpirun noticed that process rank 1") == "mpirun noticed that process rank 1"


def test_mpiruns_own_report_names_the_failed_rank() -> None:
    killed = ["[0]<stdout>:epoch 2: loss=0.5", "-" * 74,
              "mpirun noticed that process rank 1 with PID 10745 on node h2 exited on signal 9 (Killed).", "-" * 74]
    assert explain(killed) == ("rank 1 on h2 was killed by signal SIGKILL (exit 137)", True)
    raised = ["[1]<stderr>:ValueError: shard 3 is unreadable", "mpirun detected that one or more processes exited with",
              "non-zero status, thus causing", "  Process name: [[35713,1],1]", "  Exit code:    1"]
    assert explain(raised) == ("rank 1 on h2 failed (exit 1): ValueError: shard 3 is unreadable", False)


def test_a_remote_rank_lost_with_its_ssh_connection_is_named_and_retried() -> None:
    lines = ["[0]<stderr>:UnknownError: Horovod has been shut down.", "Process 1 exit with status code 255."]
    assert explain(lines) == ("rank 1 on h2 ended without an exit status (ssh exit 255): its process was killed or "
                              "its host was lost", True)


def test_a_rank_silent_past_the_limit_is_named_and_heartbeats_keep_a_rank_alive() -> None:
    output = RankOutput(HOSTS)
    output.last_heard["1"] -= 30  # rank 1 last heard from 30 s ago
    output.add("[0]<stdout>:ringflow_heartbeat")
    assert output.silence(20) == ("rank 1 on h2 stopped responding: no sign of life from it for 30 s (a frozen "
                                  "process or an unreachable host)")
    output.add("[1]<stdout>:ringflow_heartbeat")
    assert output.silence(20) is None and "ringflow_heartbeat" not in output.tails["1"]
    assert is_heartbeat("[1]<stdout>:ringflow_heartbeat") and not is_heartbeat("[1]<stdout>:epoch 1: loss=0.5")
    output.last_heard["1"] -= 30
    output.add("[1]<stdout>:ringflow_heartbeat_end")  # rank 1 ended of its own accord
    assert output.silence(20) is None


def test_a_failure_names_the_host_the_rank_said_it_runs_on() -> None:
    """Elastic ranks run on whichever hosts the discovery found, not in the listed order."""
    output = RankOutput({"0": "h1", "1": "h2"})
    for line in ["[0]<stdout>:rank 0 of 2 on h2", "[1]<stdout>:rank 1 of 2 on h1",
                 "[0]<stderr>:ValueError: shard 3 is unreadable", "Process 0 exit with status code 1."]:
        output.add(line)
    failure = output.failure(JobReport(1, None, True, 0, 1.0))
    assert str(failure) == "rank 0 on h2 failed (exit 1): ValueError: shard 3 is unreadable"


def test_a_silent_parameter_server_task_is_named_by_its_label() -> None:
    output = RankOutput({"chief0": "localhost", "ps0": "localhost", "worker0": "h1", "worker1": "h2"})
    for label in output.last_heard:
        output.last_heard[label] -= 30
    for label in ("chief0", "ps0", "worker0"):
        output.add(f"[{label}]<stdout>:ringflow_heartbeat")
    assert output.silence(20) == ("worker1 on h2 stopped responding: no sign of life from it for 30 s (a frozen "
                                  "process or an unreachable host)")
    output.add("[ps0]<stdout>:ValueError: no such variable")
    assert output.error_line("ps0") == "ValueError: no such variable"


def test_of_silent_tasks_the_one_silent_longest_is_named() -> None:
    """A coordinator waiting on a stopped worker may fall silent too, later: the worker is the cause."""
    output = RankOutput({"chief0": "localhost", "ps0": "localhost", "worker0": "h1", "worker1": "h2"})
    for label, seconds in (("chief0", 25), ("ps0", 1), ("worker0", 1), ("worker1", 27)):
        output.last_heard[label] -= seconds
    said = output.silence(20)
    assert said and said.startswith("worker1 on h2 stopped responding: no sign of life from it for 27 s"), said


def test_srun_names_the_task_that_failed_first_and_its_node() -> None:
    """Ranks under srun: srun's own account gives each task's code and node; the rank's error is quoted."""
    lines = ["[1]<stdout>:ValueError: bad shard", "srun: error: gpu07: task 1: Exited with exit code 1",
             "srun: error: gpu06: task 0: Killed", "slurm: job 9 ended FAILED (exit 1:0): a rank failed"]
    assert explain(lines) == ("rank 1 on gpu07 failed (exit 1): ValueError: bad shard", False)


def test_a_slurm_job_that_ran_out_of_time_or_lost_a_node_is_retried_a_cancelled_one_is_not() -> None:
    for state, retryable in [("TIMEOUT", True), ("NODE_FAIL", True), ("PREEMPTED", True), ("CANCELLED", False),
                             ("OUT_OF_MEMORY", False)]:
        line = f"slurm: job 9 ended {state} (exit 0:15): why"
        assert explain(["srun: error: h1: task 0: Terminated", line]) == \
            (f"Slurm job 9 ended {state} (exit 0:15): why", retryable)


def test_a_slurm_job_that_never_started_is_one_line_and_not_retried() -> None:
    line = ("slurm: job 9 ended NEVER_STARTED (exit 0:0): it did not start within slurm.pending_timeout_minutes and "
            "was cancelled (it waited for Resources)")
    assert explain([line], code=3) == (
        "Slurm job 9 ended NEVER_STARTED (exit 0:0): it did not start within slurm.pending_timeout_minutes and was "
        "cancelled (it waited for Resources)", False)


def test_a_launcher_failure_never_quotes_tensorflows_or_absls_chatter() -> None:
    chatter = ["[1]<stderr>:I0000 00:00:1795674231.676471 9968 cudart_stub.cc:31] Could not find cuda drivers on "
               "your machine, GPU will not be used.", "[1]<stderr>:E0000 00:00:1795674319.562320 11586 "
               "cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)",
               "[1]<stderr>:WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
               "[0]<stderr>:INFO:absl:Using default tensorboard plugins"]
    message, _ = explain(chatter)
    assert message == "the launcher failed (exit 1): no line of its output says why"
    message, _ = explain([*chatter, "[0]<stdout>:mpirun noticed that the job aborted"])
    assert message == "the launcher failed (exit 1): mpirun noticed that the job aborted"


def test_a_tagged_line_gives_back_what_the_rank_printed() -> None:
    assert tagged("worker1", "epoch 1: loss=0.5") == "[worker1]<stdout>:epoch 1: loss=0.5"
    assert untagged(tagged("3", "rank 3 of 4 on h2")) == "rank 3 of 4 on h2"
    assert untagged("[1]<stderr>:ValueError: x") == "ValueError: x" and untagged("slurm: job 9 ended") == \
        "slurm: job 9 ended"


def test_a_requeued_job_is_explained_by_its_last_attempt_and_a_crash_is_named_by_its_signal() -> None:
    """The first attempt's tasks, ended by Slurm's requeue, are not the failure of the second, in which rank 0
    crashed and srun killed rank 1 because of it."""
    lines = ["srun: error: h1: task 0: Exited with exit code 143", "srun: error: h2: task 1: Killed",
             "slurm: job 12 requeued (restart 1): it resumes from its last checkpoint",
             "srun: error: h1: task 0: Segmentation fault", "srun: error: h2: task 1: Killed",
             "slurm: job 12 ended FAILED (exit 1:0): a rank failed"]
    said, _ = explain(lines)
    assert said.startswith("rank 0 on h1 ") and "SIGSEGV" in said, said
