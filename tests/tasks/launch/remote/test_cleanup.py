"""Stopping a job's processes: on the other hosts (pkill), and on this machine by its marker; a lost host is passed
over."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.remote.cleanup import local_job_processes, stop_job_processes, stop_remote_processes


@pytest.fixture
def marked_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A process on this machine whose command line holds a job's configuration file (the marker)."""
    marker = str(tmp_path / "job 1" / "config.yaml")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        yield process, marker
    finally:
        process.kill()
        process.wait()


def test_processes_on_this_machine_are_not_stopped(marked_process: tuple[subprocess.Popen, str]) -> None:
    """`localhost`, `127.0.0.1` and this machine's name are not remote hosts: no pkill runs here."""
    process, marker = marked_process
    stop_remote_processes(["localhost", "127.0.0.1", socket.gethostname(), "localhost"], marker)
    assert process.poll() is None


def test_a_host_that_cannot_be_reached_is_passed_over(marked_process: tuple[subprocess.Popen, str]) -> None:
    """ssh fails on it (exit 255): no exception, and the processes here are still left alone."""
    process, marker = marked_process
    stop_remote_processes(["nosuchhost.invalid", "localhost", "nosuchhost.invalid"], marker)
    assert process.poll() is None


def test_the_job_s_processes_on_this_machine_are_stopped_by_its_marker(
        marked_process: tuple[subprocess.Popen, str]) -> None:
    process, marker = marked_process
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker + ".other"])
    try:
        assert [found.pid for found in local_job_processes(marker)] == [process.pid, other.pid]
        stop_job_processes(["localhost", "nosuchhost.invalid"], marker + ".other")
        other.wait(timeout=10)  # (psutil has reaped it: its code is lost)
        assert local_job_processes(marker + ".other") == [] and process.poll() is None  # only that job's
    finally:
        other.kill()
