"""Watching a running job from outside: ranks whose process is stopped, the job's time limit, and stopping every
process of the job (its launchers and whatever they started), stopped ones included."""
from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

import psutil

from trainer.slurm_cluster import rank_from_environment

STOPPED_STATES = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


@dataclass(frozen=True)
class JobLimits:
    """stall_seconds: a rank whose process is stopped this long ends the job (0: never); timeout_seconds: the
    whole job's limit (None: none); silence_ends_job: a silent rank ends the job (not in elastic mode, where ranks
    leave and Horovod carries on without them)."""
    stall_seconds: float = 0
    timeout_seconds: float | None = None
    silence_ends_job: bool = True

    @property
    def heartbeat_seconds(self) -> float:
        """How often each training process says it is alive (0: it does not)."""
        return self.stall_seconds / 4

    @property
    def silence_seconds(self) -> float:
        """A rank silent this long (no line, no heartbeat) has stopped responding: later than a local rank seen
        stopped for stall_seconds, which is named more precisely."""
        return self.stall_seconds * 1.5


def rank_of(process: psutil.Process) -> str | None:
    """The Horovod rank (whoever started it: horovodrun, mpirun or srun) or tf.distribute task of a job process,
    from its environment."""
    try:
        env = process.environ()
    except (psutil.Error, OSError):
        return None
    if "TF_CONFIG" in env:  # first: a launcher's own task, also when started inside a Slurm allocation
        import json
        task = json.loads(env["TF_CONFIG"]).get("task", {})
        return f"{task.get('type', 'worker')}{task.get('index', 0)}"
    return rank_from_environment(env)


def job_roots(running: list[subprocess.Popen]) -> list[psutil.Process]:
    """The started processes, taken as psutil knows them now, before any is reaped: psutil then refuses to
    signal a PID that a process started since has reused."""
    roots = []
    for popen in running:
        try:
            roots.append(psutil.Process(popen.pid))
        except psutil.NoSuchProcess:
            continue
    return roots


def job_tree(roots: list[psutil.Process]) -> list[psutil.Process]:
    """Every live process of the job: the started ones and all their descendants."""
    tree = []
    for root in roots:
        try:
            tree += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return tree


@dataclass
class JobWatch:
    """Checked about once a second while the job runs; `verdict` says why it ended the job."""
    roots: list[psutil.Process]
    limits: JobLimits
    started: float = field(default_factory=time.monotonic)
    stopped_since: dict[int, float] = field(default_factory=dict)
    verdict: str | None = None
    retryable: bool = True  # whether the job may pass when run again after what the verdict says

    def check(self, silence: Callable[[float], str | None] = lambda seconds: None) -> bool:
        """Whether the job must end now (and why, in `verdict`); `silence(seconds)` names a rank silent that long."""
        now = time.monotonic()
        if self.limits.timeout_seconds and now - self.started > self.limits.timeout_seconds:
            self.verdict = f"the job ran longer than train.timeout_minutes ({self.limits.timeout_seconds / 60:g})"
            self.retryable = False
            return True
        if self.limits.stall_seconds:
            self.verdict = self._stopped_rank(now) or \
                (silence(self.limits.silence_seconds) if self.limits.silence_ends_job else None)
        return self.verdict is not None

    def _stopped_rank(self, now: float) -> str | None:
        """A sentence naming a rank stopped for stall_seconds, else None."""
        seen = set()
        for process in job_tree(self.roots):
            try:
                stopped = process.status() in STOPPED_STATES
            except psutil.NoSuchProcess:
                continue
            if stopped:
                seen.add(process.pid)
                since = self.stopped_since.setdefault(process.pid, now)
                if now - since >= self.limits.stall_seconds:
                    rank = rank_of(process)
                    who = f"rank {rank}" if rank is not None else f"process {process.pid}"
                    return (f"{who} stopped responding: its process (pid {process.pid}) has been stopped for "
                            f"{now - since:.0f} s (train.stall_timeout_seconds: {self.limits.stall_seconds:g})")
        self.stopped_since = {pid: since for pid, since in self.stopped_since.items() if pid in seen}
        return None


def kill_all(processes: list[psutil.Process], grace_seconds: float = 10) -> None:
    """SIGKILL each process psutil still knows as itself (never a PID taken since by another), and wait for them."""
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=grace_seconds)


def stop_tree(running: list[subprocess.Popen], roots: list[psutil.Process], grace_seconds: float = 10) -> None:
    """SIGTERM every process of the job (SIGCONT first, so stopped ones can act on it), SIGKILL what is left."""
    tree = [process for process in job_tree(roots) if process.is_running()]
    for process in tree:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                process.send_signal(sig)
            except psutil.NoSuchProcess:
                break
    _, alive = psutil.wait_procs(tree, timeout=grace_seconds)
    kill_all(alive, grace_seconds)
    for popen in running:
        try:
            popen.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            popen.kill()
