"""servers/run_as.sh: what `make services` starts its servers with when root starts it. The command runs as the
unprivileged user, with the same pid; a folder closed to that user (pyenv's Python under /root, a checkout in a
home of mode 0700) opens to it only as far as the paths named, and no folder's mode changes."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import servers.setup

RUN_AS = str(servers.setup.RUN_AS)


@pytest.fixture
def closed(tmp_path: Path) -> Path:
    """A folder only root enters, holding what a server needs and what it must not see."""
    folder = tmp_path / "closed"
    (folder / "python" / "bin").mkdir(parents=True)
    (folder / "python" / "bin" / "tool").write_text("the interpreter\n")
    (folder / "secret").write_text("root's own\n")
    folder.chmod(0o700)
    (folder / "python").chmod(0o755)
    return folder


def as_nobody(paths: list[Path], *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([RUN_AS, "nobody", *map(str, paths), "--", *command], capture_output=True, text=True,
                          timeout=60)


def test_the_command_runs_as_the_user_and_reaches_only_the_paths_named(closed: Path) -> None:
    done = as_nobody([closed / "python"], "sh", "-c",
                     f"id -un; cat {closed}/python/bin/tool; ls -A {closed}; cat {closed}/secret || echo refused")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["nobody", "the interpreter", "python", "refused"]
    assert closed.stat().st_mode & 0o777 == 0o700  # opened for that command alone
    assert as_nobody([], "cat", str(closed / "python" / "bin" / "tool")).returncode != 0  # not named: closed


def test_the_command_keeps_the_pid_it_was_started_with(closed: Path) -> None:
    for paths in ([], [closed / "python"]):  # without and with a namespace of its own
        started = subprocess.Popen([RUN_AS, "nobody", *map(str, paths), "--", "sh", "-c", "echo $$"],
                                   stdout=subprocess.PIPE, text=True)
        output, _ = started.communicate(timeout=60)
        assert int(output) == started.pid  # a pid file of `make services` names the server itself


def test_a_path_named_through_a_link_opens_where_the_link_leads(closed: Path, tmp_path: Path) -> None:
    """A checkout copied for tests links its .venv to another checkout's."""
    checkout = tmp_path / "checkout"
    checkout.mkdir(mode=0o700)
    (checkout / ".venv").symlink_to(closed / "python")
    done = as_nobody([checkout / ".venv"], "cat", str(checkout / ".venv" / "bin" / "tool"))
    assert (done.returncode, done.stdout) == (0, "the interpreter\n"), done.stderr


def test_a_caller_s_environment_does_not_skip_the_namespace() -> None:
    """RINGFLOW_IN_NAMESPACE (what run_as.sh set for itself once) from a caller's environment: the closed folder
    still opens in a namespace of the command's own, never over the real folder in the caller's. (The folder lies
    where every user passes: pytest's own folder is closed, and would be what a faulty run_as.sh mounts over.)"""
    top = Path(tempfile.mkdtemp(prefix="ringflow-run-as-", dir="/tmp"))
    top.chmod(0o711)
    closed = top / "closed"
    (closed / "python").mkdir(parents=True)
    (closed / "python" / "tool").write_text("the interpreter\n")
    (closed / "secret").write_text("root's own\n")
    closed.chmod(0o700)
    try:
        done = subprocess.run([RUN_AS, "nobody", str(closed / "python"), "--", "cat", str(closed / "python" / "tool")],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, RINGFLOW_IN_NAMESPACE="1"))
        assert (done.returncode, done.stdout) == (0, "the interpreter\n"), done.stderr
        assert str(top) not in Path("/proc/self/mountinfo").read_text()  # nothing mounted in the caller's namespace
        assert (closed / "secret").read_text() == "root's own\n"
    finally:
        while str(closed) in Path("/proc/self/mountinfo").read_text():  # what a faulty run_as.sh left
            subprocess.run(["umount", "-R", "-l", str(closed)], check=True)
        shutil.rmtree(top)
