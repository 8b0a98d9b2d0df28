"""Run a training job's processes (horovodrun, or tf.distribute workers), streaming their lines, watching for
stopped ranks and the job's time limit, and naming the failing rank, its host and the likely cause on error."""
from __future__ import annotations

import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from tasks.interrupt import interrupted, interrupts_held
from tasks.launch.output.diagnosis import (
    JobReport,
    RankFailed,
    RankOutput,
    horovodrun_line,
    is_heartbeat,
    oom_kill_count,
    oom_killed_pids,
    tagged,
)
from tasks.launch.supervise.watch import JobLimits, JobWatch, job_roots, stop_tree
from tasks.redaction import redact

__all__ = ["JobLimits", "Process", "RankFailed", "StartedJob", "run_processes", "run_streaming", "start_job"]
NO_LIMITS = JobLimits()  # frozen: one shared default
OUTPUT_GRACE_SECONDS = 2.0  # a failed process's last lines arrive within this, even while others hold its output


@dataclass(frozen=True)
class Process:
    """One process of a training job. `label` prefixes its lines like horovodrun's `[rank]<stdout>:` (None: the
    process prefixes its own, as horovodrun does); `waited` processes end the job, the others (servers) are stopped.
    `hosts`: where its ranks run, in rank order (horovodrun), or the one host of a labelled process."""
    command: list[str]
    env: dict[str, str]
    label: str | None = None
    waited: bool = True
    hosts: tuple[str, ...] = ("localhost",)


def _pump(index: int, process: subprocess.Popen, label: str | None, lines: queue.Queue) -> None:
    assert process.stdout is not None  # started with stdout=PIPE
    for raw in process.stdout:
        text = redact(horovodrun_line(raw.rstrip("\n")))  # a rank's line may quote a URL with its password
        lines.put((index, tagged(label, text) if label is not None else text))
    process.wait()
    lines.put((index, None))  # this process has ended and all its lines are in


@dataclass
class StartedJob:
    """A job's processes once started: their output goes into `lines` as (index, line), (index, None) at each end."""
    running: list[subprocess.Popen] = field(default_factory=list)
    roots: list[psutil.Process] = field(default_factory=list)
    lines: queue.Queue[tuple[int, str | None]] = field(default_factory=queue.Queue)

    def alive(self) -> bool:
        return bool(self.running) and all(process.poll() is None for process in self.running)

    def stop(self) -> None:
        """Every process of the job, and every process they started, gone."""
        stop_tree(self.running, self.roots)


def start_job(processes: list[Process], cwd: Path, job: StartedJob | None = None) -> StartedJob:
    """Start every process with its output pumped into the job's lines; bytes that are not UTF-8 are replaced. No
    process reads the terminal (ssh, horovodrun's and mpirun's included: a launcher in the background would be
    stopped). Ctrl-C waits until all are started (and known to `job`, when given, for stopping them)."""
    job = job or StartedJob()
    with interrupts_held():
        for spec in processes:
            job.running.append(subprocess.Popen(spec.command, cwd=cwd, env=spec.env, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                errors="replace", bufsize=1))
        job.roots.extend(job_roots(job.running))  # before the pumps can reap any
        for index, (process, spec) in enumerate(zip(job.running, processes)):
            threading.Thread(target=_pump, args=(index, process, spec.label, job.lines), daemon=True).start()
    return job


def _rank_hosts(processes: list[Process]) -> dict[str, str]:
    """Rank (or label) -> host, for naming a failure."""
    hosts: dict[str, str] = {}
    for process in processes:
        if process.label is None:
            hosts |= {str(rank): host for rank, host in enumerate(process.hosts)}
        else:
            hosts[process.label] = process.hosts[0]
    return hosts


def _failed_but_held_open(running: list[subprocess.Popen], waiting: set[int], seen: dict[int, float]) -> int | None:
    """A waited process that exited non-zero a while ago though its output is still open (processes it started,
    orphaned, hold it: a killed horovodrun's or mpirun's ranks): the job has failed; its lines until then are in."""
    now = time.monotonic()
    for index in sorted(waiting):
        if running[index].poll() not in (None, 0) and now - seen.setdefault(index, now) >= OUTPUT_GRACE_SECONDS:
            return index
    return None


def _follow(processes: list[Process], running: list[subprocess.Popen], lines: queue.Queue,
            on_line: Callable[[str], None], output: RankOutput, watch: JobWatch) -> int | None:
    """Pass lines on until every waited process has ended (None) or one failed (its exit code)."""
    waiting = {i for i, spec in enumerate(processes) if spec.waited}
    checked, failed_at, failed = time.monotonic(), dict[int, float](), None
    while waiting and failed is None:
        if time.monotonic() - checked >= 1.0:  # about once a second, however much the job prints
            checked = time.monotonic()
            if interrupted():  # Ctrl-C, seen by the main thread while this one follows a job (a sweep's trial)
                return -1
            if watch.check(output.silence):
                return -1
            failed = _failed_but_held_open(running, waiting, failed_at)
        try:
            index, line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if line is not None:
            output.add(line)
            if not is_heartbeat(line):
                on_line(line)
        elif running[index].returncode != 0:
            failed = index
        else:
            waiting.discard(index)
    if failed is None:
        return None
    label = processes[failed].label
    if label is not None:
        output.exited(label, running[failed].returncode)
    return running[failed].returncode


def run_processes(processes: list[Process], cwd: Path, on_line: Callable[[str], None],
                  limits: JobLimits = NO_LIMITS, started: StartedJob | None = None) -> None:
    """Run the job's processes together, passing every line to on_line; raise RankFailed naming the failure.
    `started`: these processes, started already (start_job), their lines so far not yet passed on.

    The job ends when every waited process has ended, as soon as any process fails, when a rank has been stopped
    for limits.stall_seconds, or at limits.timeout_seconds. Every process of the job, and every process they
    started, is gone when this returns.
    """
    output, job = RankOutput(_rank_hosts(processes)), started or StartedJob()
    oom_before, started_at = oom_kill_count(), time.monotonic()
    try:
        if started is None:
            start_job(processes, cwd, job)
        watch = JobWatch(job.roots, limits)
        code = _follow(processes, job.running, job.lines, on_line, output, watch)
    finally:
        job.stop()
    if interrupted():  # Ctrl-C reached the job's processes too: whatever they made of it, the run was interrupted
        raise KeyboardInterrupt
    if code is not None:
        oom_kills = oom_kill_count() - oom_before
        report = JobReport(code, watch.verdict, watch.retryable, oom_kills, time.monotonic() - started_at,
                           oom_killed_pids() if oom_kills else None)
        raise output.failure(report)


def run_streaming(command: list[str], env: dict[str, str], cwd: Path, on_line: Callable[[str], None],
                  limits: JobLimits = NO_LIMITS) -> None:
    """Run one launcher command (e.g. horovodrun), streaming its lines; raise RankFailed if it fails."""
    run_processes([Process(command, env)], cwd, on_line, limits)
