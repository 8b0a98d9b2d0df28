"""Run horovodrun as a child process, streaming its lines and naming the failing rank on error."""
from __future__ import annotations

import re
import subprocess
from collections import defaultdict, deque
from pathlib import Path
from typing import Callable

RANK_LINE = re.compile(r"^\[(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>:(?P<text>.*)$")
EXIT_LINE = re.compile(r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)")
ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit)\b.*|^\s*\w+Error:")


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


def run_streaming(command: list[str], env: dict[str, str], cwd: Path, on_line: Callable[[str], None]) -> None:
    """Run `command`, passing every output line to on_line; raise RankFailed if it fails."""
    output = RankOutput()
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as process:
        for raw in process.stdout:
            line = raw.rstrip("\n")
            output.add(line)
            on_line(line)
        returncode = process.wait()
    if returncode != 0:
        raise RankFailed(output.explain(returncode))
