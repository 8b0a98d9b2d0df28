"""Run horovodrun as a child process, streaming its lines and naming the failing rank on error."""
from __future__ import annotations

import queue
import re
import subprocess
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

RANK_LINE = re.compile(r"^\[(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>:(?P<text>.*)$")
EXIT_LINE = re.compile(r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)")
NOISE_LINE = re.compile(r"(<std(err|out)>:)?\s*([IWE]\d{4} \d\d:\d\d:\d\d|[IWE]0000 |WARNING: All log messages before"
                        r"|To enable the following instructions|.*Callback method `on_train_batch_end` is slow)")
ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit)\b.*|^\s*\w+Error:")


def is_noise(line: str) -> bool:
    """TensorFlow's start-up and C++ log chatter (kept out of the info log; errors still explain failures)."""
    return bool(NOISE_LINE.match(line.split("]", 1)[-1] if line.startswith("[") else line))


class RankFailed(RuntimeError):
    """A rank (or the launcher) failed; the message names the rank and its last error line."""


class RankOutput:
    """Keeps the last lines of each rank to explain a failure."""

    def __init__(self, keep: int = 40) -> None:
        self.tails: dict[str, deque[str]] = defaultdict(lambda: deque(maxlen=keep))
        self.failed_ranks: list[str] = []

    def add(self, line: str) -> None:
        match = RANK_LINE.match(line)
        rank, text = (match["rank"], match["text"]) if match else ("launcher", line)
        self.tails[rank].append(text)
        exited = EXIT_LINE.search(line)
        if exited and exited["code"] != "0" and exited["rank"] not in self.failed_ranks:
            self.failed_ranks.append(exited["rank"])

    def explain(self, returncode: int) -> str:
        """One line: which rank failed and with what error."""
        candidates = self.failed_ranks + [r for r in self.tails if r not in self.failed_ranks]
        for rank in candidates:
            errors = [text.strip() for text in self.tails[rank] if ERROR_LINE.match(text)]
            if errors:
                who = "launcher" if rank == "launcher" else f"rank {rank}"
                return f"{who} failed: {errors[-1]}"
        last = next((t.strip() for r in candidates for t in reversed(self.tails[r]) if t.strip()), "no output")
        return f"horovodrun exited with status {returncode}: {last}"


@dataclass(frozen=True)
class Process:
    """One process of a training job. `label` prefixes its lines like horovodrun's `[rank]<stdout>:`
    (None: the process prefixes its own); `waited` processes end the job, the others (servers) are stopped."""
    command: list[str]
    env: dict[str, str]
    label: str | None = None
    waited: bool = True


def _pump(index: int, process: subprocess.Popen, label: str | None, lines: queue.Queue) -> None:
    for raw in process.stdout:
        text = raw.rstrip("\n")
        lines.put((index, f"[{label}]<stdout>:{text}" if label is not None else text))
    process.wait()
    lines.put((index, None))  # this process has ended and all its lines are in


def _finish(running: list[subprocess.Popen]) -> None:
    for process in running:
        if process.poll() is None:
            process.terminate()
    for process in running:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_processes(processes: list[Process], cwd: Path, on_line: Callable[[str], None]) -> None:
    """Run the job's processes together, passing every line to on_line; raise RankFailed naming the failure.

    The job ends when every waited process has ended, or as soon as any process fails.
    """
    output, lines = RankOutput(), queue.Queue()
    running = [subprocess.Popen(p.command, cwd=cwd, env=p.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1) for p in processes]
    for index, (process, spec) in enumerate(zip(running, processes)):
        threading.Thread(target=_pump, args=(index, process, spec.label, lines), daemon=True).start()
    waiting = {i for i, spec in enumerate(processes) if spec.waited}
    failed: tuple[Process, int] | None = None
    try:
        while waiting and failed is None:
            index, line = lines.get()
            if line is not None:
                output.add(line)
                on_line(line)
            elif running[index].returncode != 0:
                failed = processes[index], running[index].returncode
            else:
                waiting.discard(index)
    finally:
        _finish(running)
    if failed:
        process, code = failed
        if process.label is not None and process.label not in output.failed_ranks:
            output.failed_ranks.insert(0, process.label)
        raise RankFailed(output.explain(code))


def run_streaming(command: list[str], env: dict[str, str], cwd: Path, on_line: Callable[[str], None]) -> None:
    """Run one launcher command (e.g. horovodrun), streaming its lines; raise RankFailed if it fails."""
    run_processes([Process(command, env)], cwd, on_line)
