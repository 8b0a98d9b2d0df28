"""Why a job failed, in one line: which rank, on which host, with what exit code or signal, and the likely cause;
and whether running it again may pass (a killed or frozen rank may; bad input, out of memory, a bug do not)."""
from __future__ import annotations

import os
import re
import signal
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path

from tasks.errors import ERROR_LINE
from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.command import SSH_FAILED
from tasks.launch.slurm.states import end_message, parse_ended, parse_requeued
from trainer.protocol import HEARTBEAT_END_LINE, is_heartbeat_text, parse_placed, placed_pid

MPI_TAG = re.compile(r"^\[\d+,(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>:")  # mpirun's --tag-output: [job,rank]
MPI_TAG_AT_END = re.compile(r"\[\d+,\d+\]<(stdout|stderr)>:$")  # mpirun's tag of an empty write, glued to a line
# a rank's line: horovodrun's `[rank]`, or a labelled process's `[worker0]`, `[ps0]`, `[chief0]` (parameter-server)
RANK_LINE = re.compile(r"^\[(?P<rank>\d+|[a-z]+\d+)\]<(?P<stream>stdout|stderr)>:(?P<text>.*)$")
EXIT_LINE = re.compile(r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)")
NOISE_LINE = re.compile(r"(<std(err|out)>:)?\s*([IWE]\d{4} \d\d:\d\d:\d\d|[IWE]0000 |WARNING: All log messages before"
                        r"|To enable the following instructions|.*Callback method `on_train_batch_end` is slow"
                        r"|(INFO|WARNING|DEBUG):(absl|tensorflow):)")
# TensorFlow's error from a graph (a tf.function, Keras's training step): its heading says only "Graph execution
# error:", then the stack where the failing node was defined (two lines a frame: longer than a tail), then the cause,
# then the node; the cause is the line before the node, passing over the afterword some errors add
GRAPH_ERROR = re.compile(r"^\s*(\w+\.)*(?P<type>\w+Error): Graph execution error:\s*$")
FAILED_NODE = re.compile(r"^\s*\[\[\{\{node ")
GRAPH_ERROR_AFTERWORD = "The error could be from a previous operation"
MPI_SIGNALLED = re.compile(r"process rank (?P<rank>\d+) with PID \d+ on node \S+ exited on signal (?P<signal>\d+)")
MPI_FIRST_FAILED = re.compile(r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]")  # then "Exit code: N"
MPI_EXIT_CODE = re.compile(r"^\s*Exit code:\s*(?P<code>-?\d+)")
GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+)ms")  # a rank gave up waiting for a silent peer
STALL_MISSING = re.compile(r"^\s*(?P<rank>\d+): \[")  # Horovod's stall inspector: "Missing ranks:" then "1: [...]"
TRANSIENT = re.compile(r"gloo|connection (reset|refused|closed)|broken pipe|ssh|socket|timed? ?out|unavailable",
                       re.IGNORECASE)
# a connection refused or dropped at once (not a timeout: launching again would wait as long again)
CONNECTION_LOST = re.compile(r"connection (reset|refused|closed)|Connection(Refused|Reset)Error|broken pipe",
                             re.IGNORECASE)
# a server's port was taken between the launcher's pick and the server's start (TensorFlow's gRPC server's words)
PORT_TAKEN = re.compile(r"Could not start gRPC server|Address already in use")
# srun's account of a task that ended badly (`srun: error: h2: task 1: Exited with exit code 3`, `... task 0: Killed`)
SRUN_TASK = re.compile(r"^srun: error: (?P<host>[^:\s]+): tasks? (?P<ranks>[\d,-]+): (?P<what>.+)$")
SRUN_EXIT = re.compile(r"Exited with exit code (?P<code>\d+)")
# srun's words for a task a signal ended, as 128 + the signal (a rank's own exit code would be)
SRUN_SIGNALLED = {"Killed": 128 + signal.SIGKILL, "Terminated": 128 + signal.SIGTERM,
                  "Segmentation fault": 128 + signal.SIGSEGV, "Aborted": 128 + signal.SIGABRT,
                  "Bus error": 128 + signal.SIGBUS, "Floating point exception": 128 + signal.SIGFPE,
                  "Illegal instruction": 128 + signal.SIGILL}
TERMINATED_BY_LAUNCHER = {128 + signal.SIGTERM, -signal.SIGTERM}


def horovodrun_line(line: str) -> str:
    """A rank's line as horovodrun tags it with Gloo (`[rank]<stdout>:`), also when mpirun tagged it."""
    return MPI_TAG.sub(r"[\g<rank>]<\g<stream>>:", MPI_TAG_AT_END.sub("", line), count=1)


def tagged(rank: str, text: str) -> str:
    """A rank's (or labelled process's) output line as the launcher passes it on: horovodrun's `[rank]<stdout>:`
    tag, which every launcher's lines are given (RANK_LINE reads it back)."""
    return f"[{rank}]<stdout>:{text}"


def untagged(line: str) -> str:
    """What a rank printed, without the tag a launcher put before it (any other line as it is)."""
    match = RANK_LINE.match(line)
    return match["text"] if match else line


def is_heartbeat(line: str) -> bool:
    """A training process's sign of life, or its last (kept from the console)."""
    return is_heartbeat_text(untagged(line))


def is_noise(line: str) -> bool:
    """TensorFlow's start-up and C++ log chatter (kept out of the info log; errors still explain failures)."""
    return bool(NOISE_LINE.match(line.split("]", 1)[-1] if line.startswith("[") else line))


def oom_kill_count() -> int:
    """Processes the kernel's out-of-memory killer has ended since boot (/proc/vmstat; 0 where unknown)."""
    try:
        found = re.search(r"^oom_kill (\d+)$", Path("/proc/vmstat").read_text(), re.M)
    except OSError:
        return 0
    return int(found[1]) if found else 0


OOM_KILLED = re.compile(r"Killed process (\d+) ")  # the kernel's line for each process its out-of-memory killer ends


def oom_killed_pids() -> frozenset[int] | None:
    """The processes the kernel log (/dev/kmsg, its ring buffer) says the out-of-memory killer ended; None where
    that log cannot be read (only the count since boot is known then)."""
    try:
        kernel_log = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    pids: set[int] = set()
    try:
        while True:
            try:
                record = os.read(kernel_log, 8192)
            except BlockingIOError:  # read to its end
                break
            except BrokenPipeError:  # records overwritten while reading: the next one follows
                continue
            if killed := OOM_KILLED.search(record.decode(errors="replace")):
                pids.add(int(killed[1]))
    finally:
        os.close(kernel_log)
    return frozenset(pids)


def signal_of(code: int) -> int | None:
    """The signal that ended a process: negative return codes, or a shell's 128 + N."""
    if code < 0:
        return -code
    return code - 128 if 128 < code < 128 + 65 else None


class RankFailed(RuntimeError):
    """A rank (or the launcher) failed; the message names the rank, its host and the likely cause.
    `retryable`: whether running the job again may pass; `port_taken`: it failed at the start, on a port that was
    taken on its host after the launcher picked it (launching again with new ports is the cure); `launch_again`:
    that, or the launcher lost a connection of its own before any rank started (Horovod's interface discovery
    refused on a busy host): nothing has trained, and launching again is the cure."""

    def __init__(self, message: str, retryable: bool, port_taken: bool = False, unstarted: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.port_taken = port_taken
        self.launch_again = port_taken or unstarted


@dataclass(frozen=True)
class JobReport:
    """What the launcher saw of a failed job: the failing exit code (-1: ended by the watch), the watch's verdict,
    out-of-memory kills on this machine during the job, how long it ran, and the processes the kernel log names as
    the out-of-memory killer's (None: unknown)."""
    code: int
    verdict: str | None
    verdict_retryable: bool
    oom_kills: int
    seconds: float
    oom_killed: frozenset[int] | None = None


class RankOutput:
    """Keeps the last lines and exit codes of each rank to explain a failure."""

    def __init__(self, hosts: dict[str, str], keep: int = 40) -> None:
        self.hosts = hosts
        self.tails: dict[str, deque[str]] = defaultdict(lambda: deque(maxlen=keep))
        self.codes: dict[str, int] = {}
        self.stalled: list[str] = []
        self.waited: dict[str, int] = {}  # ranks that timed out waiting for a peer: seconds they waited
        self.mpi_failed_rank: str | None = None  # mpirun named the first failed rank; its exit code follows
        self.scheduler_end: tuple[str, str, str, str] | None = None  # a scheduler's job ended: id, state, exit, why
        self.last_heard = {rank: time.monotonic() for rank in hosts}  # each rank's (or server's) last line
        self.pids: dict[str, int] = {}  # each rank's process id, as its placed line gives it
        self.errors: dict[str, str] = {}  # each rank's last error line, however long the traceback after it
        self.graph_errors: dict[str, str] = {}  # a rank's TensorFlow graph error whose cause is still to come

    def add(self, line: str) -> None:
        match = RANK_LINE.match(line)
        rank, text = (match["rank"], match["text"]) if match else ("launcher", line)
        if rank in self.last_heard:
            self.last_heard[rank] = time.monotonic()
        if text == HEARTBEAT_END_LINE:  # a rank done before the others (rank 0 still saving) is not silent
            self.last_heard.pop(rank, None)
        if is_heartbeat_text(text):
            return
        self._note_error(rank, text)
        self.tails[rank].append(text)
        if match and (placed := parse_placed(text)):
            if not is_local(placed[2]):
                self.hosts[rank] = placed[2]  # where it really runs (elastic: on any host listed)
            if pid := placed_pid(text):
                self.pids[rank] = pid
        if (exited := EXIT_LINE.search(line)) and exited["code"] != "0":
            self.exited(exited["rank"], int(exited["code"]))
        if (missing := STALL_MISSING.match(text)) and missing["rank"] not in self.stalled:
            self.stalled.append(missing["rank"])
        if (timeout := GLOO_TIMEOUT.search(text)) and match:
            self.waited.setdefault(rank, int(timeout["ms"]) // 1000)
        if not match:
            self._mpirun_report(line)
            self._scheduler_report(line)

    def _note_error(self, rank: str, text: str) -> None:
        """Keep a rank's error line (for TensorFlow's graph errors, the error's type and its cause)."""
        if ERROR_LINE.match(text):
            self.errors[rank] = text.strip()
            if graph_error := GRAPH_ERROR.match(text):
                self.graph_errors[rank] = graph_error["type"]
        elif FAILED_NODE.match(text) and rank in self.graph_errors:
            cause = next((line.strip() for line in reversed(self.tails[rank])
                          if line.strip() and not line.strip().startswith(GRAPH_ERROR_AFTERWORD)), "")
            self.errors[rank] = f"{self.graph_errors.pop(rank)}: {cause or text.strip()}"

    def _mpirun_report(self, line: str) -> None:
        """mpirun's own account of a rank that failed: a signal, or the first non-zero exit code."""
        if signalled := MPI_SIGNALLED.search(line):
            self.exited(signalled["rank"], 128 + int(signalled["signal"]))  # as Gloo's launcher reports it
        elif first := MPI_FIRST_FAILED.search(line):
            self.mpi_failed_rank = first["rank"]
        elif (code := MPI_EXIT_CODE.match(line)) and self.mpi_failed_rank is not None:
            self.exited(self.mpi_failed_rank, int(code["code"]))

    def _scheduler_report(self, line: str) -> None:
        """srun's account of tasks that ended badly (their host and code), and the job's end (the follower's)."""
        if task := SRUN_TASK.match(line):
            code = SRUN_EXIT.search(task["what"])
            number = int(code["code"]) if code else SRUN_SIGNALLED.get(task["what"].strip(), 1)
            for rank in _ranks(task["ranks"]):
                self.hosts[rank] = task["host"]
                self.exited(rank, number)
        elif parse_requeued(line):  # a new attempt: what the ranks of the one Slurm ended said is over
            self.codes.clear()
        elif ended := parse_ended(line):
            self.scheduler_end = ended

    def silence(self, seconds: float) -> str | None:
        """A sentence naming the rank silent longest when no line came from it for `seconds` (its heartbeat
        included), else None."""
        now = time.monotonic()
        if not self.last_heard:
            return None
        rank = min(self.last_heard, key=self.last_heard.__getitem__)  # silent longest: the others may wait on it
        if now - self.last_heard[rank] < seconds:
            return None
        return (f"{self.who(rank)} stopped responding: no sign of life from it for {now - self.last_heard[rank]:.0f} s "
                f"(a frozen process or an unreachable host)")

    def exited(self, rank: str, code: int) -> None:
        self.codes.setdefault(rank, code)

    def who(self, rank: str) -> str:
        if rank == "launcher":
            return "the launcher"
        name = f"rank {rank}" if rank.isdigit() else rank  # a parameter-server task: ps0, worker1, chief0
        return f"{name} on {self.hosts.get(rank, 'localhost')}"

    def first_failed(self) -> str | None:
        """The rank that failed first, passing over ranks the launcher terminated because of it."""
        own = [rank for rank, code in self.codes.items() if code not in TERMINATED_BY_LAUNCHER]
        return next(iter(own or list(self.codes)), None)

    def error_line(self, rank: str) -> str | None:
        return self.errors.get(rank)

    def failure(self, report: JobReport) -> RankFailed:
        """One line naming the failure, and whether it may pass next time."""
        if report.verdict:
            return RankFailed(report.verdict, retryable=report.verdict_retryable)
        if self.scheduler_end and (self.scheduler_end[1] != "FAILED" or self.first_failed() is None):
            message, retryable = end_message(*self.scheduler_end)
            error = next((self.error_line(rank) for rank in self.tails if self.error_line(rank)), None)
            return RankFailed(message + (f"; {error}" if error and self.scheduler_end[1] == "FAILED" else ""),
                              retryable)
        if self.stalled:
            return RankFailed(f"{self.who(self.stalled[0])} stalled: Horovod shut the job down after no progress "
                              f"(train.stall_timeout_seconds)", retryable=True)
        if self.waited:
            return self._silent_peer()
        rank = self.first_failed()
        if rank is None:
            return self._launcher_failure(report.code)
        return self._rank_failure(rank, self.codes[rank], report)

    def _oom_killed(self, rank: str, report: JobReport) -> bool:
        """Whether the out-of-memory killer ended this rank: the kernel log names its process when both are known;
        else any such kill on this machine during the job counts (another process's too)."""
        pid = self.pids.get(rank)
        if pid is None or report.oom_killed is None:
            return report.oom_kills > 0
        return pid in report.oom_killed

    def _rank_failure(self, rank: str, code: int, report: JobReport) -> RankFailed:
        number = signal_of(code)
        if number is not None:
            name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
            if number == signal.SIGKILL and report.oom_kills and self._oom_killed(rank, report):
                return RankFailed(f"{self.who(rank)} was killed by the out-of-memory killer (exit {code}, {name}): "
                                  f"lower train.batch_size or input.image_size", retryable=False)
            return RankFailed(f"{self.who(rank)} was killed by signal {name} (exit {code})", retryable=True)
        own_error = self.error_line(rank)
        if code == SSH_FAILED and own_error is None and not is_local(self.hosts.get(rank, "localhost")):
            return RankFailed(f"{self.who(rank)} ended without an exit status (ssh exit 255): its process was killed "
                              f"or its host was lost", retryable=True)
        if own_error and PORT_TAKEN.search(own_error):
            return RankFailed(f"{self.who(rank)} could not listen on its port, taken on its host since the launch "
                              f"picked it (exit {code}): {own_error}", retryable=True, port_taken=True)
        others = (self.error_line(r) for r in self.tails if r not in (rank, "launcher"))
        error = own_error or next((line for line in others if line), None)
        if error:
            transient = bool(TRANSIENT.search(error))
            return RankFailed(f"{self.who(rank)} failed (exit {code}): {error}", retryable=transient)
        return RankFailed(f"{self.who(rank)} exited with status {code}: {self._last_line()}", retryable=True)

    def _silent_peer(self) -> RankFailed:
        """Ranks gave up waiting for a peer (Gloo's timeout): the ranks that did not are the ones that went silent."""
        waiter, seconds = next(iter(self.waited.items()))
        silent = [rank for rank in self.hosts if rank not in self.waited]
        suspects = ", ".join(self.who(rank) for rank in silent) or "another rank"
        return RankFailed(f"{suspects} stopped responding: {self.who(waiter)} waited {seconds} s for it and gave up "
                          f"(a frozen process or an unreachable host)", retryable=True)

    def _launcher_failure(self, code: int) -> RankFailed:
        error = next((self.error_line(rank) for rank in self.tails if self.error_line(rank)), None)
        message = f"the launcher failed (exit {code}): {error or self._last_line()}"
        no_rank_spoke = all(rank == "launcher" for rank in self.tails)
        return RankFailed(message, retryable=bool(error and TRANSIENT.search(error)),
                          unstarted=bool(error and CONNECTION_LOST.search(error)) and no_rank_spoke)

    def _last_line(self) -> str:
        """The last line a process printed that is not TensorFlow's or absl's chatter."""
        return next((text.strip() for tail in self.tails.values() for text in reversed(tail)
                     if text.strip() and not is_noise(text)), "no line of its output says why")


def _ranks(listed: str) -> list[str]:
    """srun's task list (`1`, `0-3`, `0,2`) as rank names."""
    ranks = []
    for part in listed.split(","):
        low, _, high = part.partition("-")
        ranks += [str(rank) for rank in range(int(low), int(high or low) + 1)]
    return ranks
