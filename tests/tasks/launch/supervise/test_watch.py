"""The launcher cannot hang: output that is not UTF-8, a stopped process, the job's time limit; nothing is left."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from tasks.launch.supervise.processes import JobLimits, Process, RankFailed, run_processes
from tests.helpers import ROOT

SLEEPER = "import time\nprint('ready', flush=True)\ntime.sleep(300)\n"


def python(code: str, label: str = "0") -> Process:
    return Process([sys.executable, "-c", code], dict(os.environ), label)


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    lines: list[str] = []
    code = "import sys\nsys.stdout.buffer.write(b'loss \\xff\\xfe\\n')\nsys.stdout.flush()\nprint('done')\n"
    run_processes([python(code)], ROOT, lines.append)
    assert lines == ["[0]<stdout>:loss \ufffd\ufffd", "[0]<stdout>:done"]


def test_a_stopped_process_ends_the_job_after_the_stall_timeout() -> None:
    code = "import os, time\nprint('ready', os.getpid(), flush=True)\ntime.sleep(300)\n"
    started: list[int] = []

    def stop_it(line: str) -> None:
        if "ready" in line:
            started.append(int(line.split()[-1]))
            os.kill(started[0], signal.SIGSTOP)

    with pytest.raises(RankFailed, match=r"^process \d+ stopped responding: its process \(pid \d+\) has been "
                                         r"stopped for [2-9] s \(train.stall_timeout_seconds: 2\)$") as failed:
        run_processes([python(code)], ROOT, stop_it, JobLimits(stall_seconds=2))
    assert failed.value.retryable
    assert not psutil.pid_exists(started[0]) or psutil.Process(started[0]).status() == psutil.STATUS_ZOMBIE


def test_the_time_limit_ends_the_job() -> None:
    with pytest.raises(RankFailed, match=r"ran longer than train.timeout_minutes") as failed:
        run_processes([python(SLEEPER)], ROOT, lambda line: None, JobLimits(timeout_seconds=2))
    assert not failed.value.retryable  # it would take as long again


def test_a_killed_process_is_named_with_its_signal(tmp_path: Path) -> None:
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    with pytest.raises(RankFailed, match=r"^rank 0 on localhost was killed by signal SIGKILL \(exit -9\)$") as failed:
        run_processes([python(code)], ROOT, lambda line: None)
    assert failed.value.retryable
