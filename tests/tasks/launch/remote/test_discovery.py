"""Horovod's elastic host discovery: the generated script prints `host:slots` for this machine and the hosts that
answer ssh now."""
from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from tasks.launch.remote.discovery import (
    DISCOVERY_SCRIPT_NAME,
    discovery_script,
    discovery_script_text,
    prepare_discovery,
    write_discovery_script,
)
from tasks.paths import WORKSPACE
from trainer.config import ElasticParams, TrainParams


def test_the_script_lists_this_machine_and_leaves_out_a_host_ssh_cannot_reach(tmp_path: Path) -> None:
    """The unreachable host comes last: the script still exits 0 (Horovod reads a failing script as an error)."""
    script = write_discovery_script({"localhost": 2, "127.0.0.1": 1, "nosuchhost.invalid": 4}, tmp_path)
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "localhost:2\n127.0.0.1:1\n", "")


def test_the_script_is_executable_in_place_of_the_last_one(tmp_path: Path) -> None:
    write_discovery_script({"localhost": 8}, tmp_path)
    script = write_discovery_script({"localhost": 3}, tmp_path)
    assert script == tmp_path / DISCOVERY_SCRIPT_NAME and script.stat().st_mode & stat.S_IXUSR
    assert subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout == "localhost:3\n"
    assert [path.name for path in tmp_path.iterdir()] == [DISCOVERY_SCRIPT_NAME]  # no temporary file left


def test_only_the_remote_hosts_are_asked_by_ssh() -> None:
    text = discovery_script_text({"localhost": 2, "nosuchhost.invalid": 4})
    assert text.startswith("#!/bin/sh\n") and text.endswith("exit 0\n")
    assert "echo localhost:2\n" in text and "answers nosuchhost.invalid && echo nosuchhost.invalid:4\n" in text
    assert "ConnectTimeout=2" in text and "BatchMode=yes" in text


def test_a_host_name_is_quoted_for_the_shell(tmp_path: Path) -> None:
    """A name the shell would expand is printed as given (and, not resolving, left out for its ssh failure)."""
    text = discovery_script_text({"localhost": 1, "$(touch pwned).invalid": 2})
    done = subprocess.run(["sh", "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.stdout == "localhost:1\n" and not (tmp_path / "pwned").exists()


def test_the_generated_script_is_in_the_jobs_directory(tmp_path: Path) -> None:
    assert discovery_script(ElasticParams(max_np=4), tmp_path) == tmp_path / DISCOVERY_SCRIPT_NAME


def test_the_users_script_is_resolved_from_the_workspace(tmp_path: Path) -> None:
    relative = ElasticParams(max_np=4, discovery_script="scripts/my_hosts.sh")
    assert discovery_script(relative, tmp_path) == WORKSPACE.root / "scripts" / "my_hosts.sh"
    absolute = ElasticParams(max_np=4, discovery_script=str(tmp_path / "hosts.sh"))
    assert discovery_script(absolute, tmp_path / "job") == tmp_path / "hosts.sh"
    home = ElasticParams(max_np=4, discovery_script="~/hosts.sh")
    assert discovery_script(home, tmp_path) == Path.home() / "hosts.sh"


def test_an_elastic_job_without_its_own_script_gets_one_written(tmp_path: Path) -> None:
    train = TrainParams(np=2, elastic=ElasticParams(min_np=1, max_np=4))
    prepare_discovery(train, {"localhost": 2}, tmp_path / "job")
    script = tmp_path / "job" / DISCOVERY_SCRIPT_NAME
    assert subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True).stdout == "localhost:2\n"


def test_no_script_is_written_for_a_fixed_job_or_the_users_own(tmp_path: Path) -> None:
    prepare_discovery(TrainParams(np=2), {"localhost": 2}, tmp_path / "fixed")
    users = TrainParams(np=2, elastic=ElasticParams(max_np=4, discovery_script=str(tmp_path / "mine.sh")))
    prepare_discovery(users, {"localhost": 2}, tmp_path / "own")
    assert list(tmp_path.iterdir()) == []


def test_a_host_that_answers_and_then_says_nothing_is_left_out_within_seconds(tmp_path: Path) -> None:
    """Its ssh port takes the connection and then stays silent (a host frozen, or its link lost mid-probe): the
    probe gives up (Horovod's elastic driver waits for the script; one hung probe once stopped a job 13 minutes)."""
    import socket
    silent = socket.socket()
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    silent.bind(("127.0.0.5", 22))
    silent.listen(8)
    try:
        script = write_discovery_script({"localhost": 1, "127.0.0.5": 1}, tmp_path)
        done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60)  # hung: it fails
        assert (done.returncode, done.stdout) == (0, "localhost:1\n")
    finally:
        silent.close()
