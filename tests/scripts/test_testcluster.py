"""scripts/testcluster.sh as a user meets it: `up` then `down` gives back the user's ~/.ssh/config and /etc/hosts as
they were, even when their last line has no newline; an `up` that fails halfway undoes what it made."""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import quiet_env
from tests.tasks.launch.cluster_hosts import SCRIPT, STATE, STATES, cluster_state, on_host

pytestmark = pytest.mark.slow  # makes and removes network namespaces and sshd

USER_CONFIG = "Host build\n  HostName build.example\n  User me"  # no newline after the last line
MARK = "# ringflow test cluster"


def run_script(*args: str, cluster: str = "h") -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=quiet_env() | {"RINGFLOW_TESTCLUSTER": cluster})


@pytest.fixture
def ssh_config() -> Iterator[Path]:
    """This user's ~/.ssh/config (ssh reads the one of the passwd entry's home), ending without a newline for the
    test, and put back as it was after; no cluster up before or after."""
    config = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh" / "config"
    saved = config.read_bytes() if config.is_file() else None
    run_script("down")
    config.parent.mkdir(mode=0o700, exist_ok=True)
    config.write_text(USER_CONFIG)
    try:
        yield config
    finally:
        run_script("down")
        if saved is None:
            config.unlink(missing_ok=True)
        else:
            config.write_bytes(saved)


def test_up_then_down_gives_back_the_user_s_files(ssh_config: Path) -> None:
    hosts_before = Path("/etc/hosts").read_text()
    up = run_script("up", "1")
    assert up.returncode == 0, up.stderr
    config = ssh_config.read_text()
    assert config.startswith(USER_CONFIG + "\n" + MARK + " begin\nHost h1 \n")  # the user's line left whole
    assert "h1" in Path("/etc/hosts").read_text()
    assert run_script("down").returncode == 0
    assert ssh_config.read_text().rstrip("\n") == USER_CONFIG
    assert Path("/etc/hosts").read_text() == hosts_before and MARK not in hosts_before


def test_an_up_that_fails_halfway_undoes_what_it_made(ssh_config: Path) -> None:
    """The second host's link name is taken (as by a leftover of another tool): h1 was made, h2 cannot be."""
    subprocess.run(["ip", "link", "add", "rfvh2", "type", "bridge"], check=True)
    try:
        up = run_script("up", "2")
    finally:
        subprocess.run(["ip", "link", "delete", "rfvh2"], capture_output=True)
    assert up.returncode != 0 and "up failed; undoing what it made" in up.stderr
    namespaces, daemons = cluster_state()
    assert not namespaces and not daemons and not STATE.exists()
    assert MARK not in Path("/etc/hosts").read_text()
    assert ssh_config.read_text() == USER_CONFIG


def test_a_second_cluster_beside_the_first_is_its_own(ssh_config: Path) -> None:
    """f1 (cluster f: the suite runs cluster g's tests meanwhile) comes up beside h1 with its own name, address and
    files; its `down` leaves h1 whole."""
    assert run_script("up", "1").returncode == 0
    try:
        up = run_script("up", "1", cluster="f")
        assert up.returncode == 0 and up.stdout.split() == ["f1"], up.stderr
        assert on_host("f1", "hostname").stdout.strip() == "f1" and on_host("h1", "hostname").stdout.strip() == "h1"
        assert on_host("f1", "hostname", "-I").stdout.split() == ["10.77.2.11"]
        refused = run_script("up", "1", "--slurm", cluster="f")  # one slurm.conf per machine
        assert refused.stderr.strip() == "testcluster: up: --slurm is cluster h's (one slurm.conf per machine)"
        assert run_script("down", cluster="f").returncode == 0
        assert cluster_state("f") == ([], "") and not STATES["f"].exists()
        assert on_host("h1", "true").returncode == 0 and "h1" in Path("/etc/hosts").read_text()
        assert "f1" not in Path("/etc/hosts").read_text() and "f1" not in ssh_config.read_text()
    finally:
        run_script("down", cluster="f")


def test_up_with_slurm_then_down_leaves_no_daemon_and_no_slurm_conf(ssh_config: Path) -> None:
    up = run_script("up", "1", "--slurm")
    assert up.returncode == 0, up.stderr
    nodes = subprocess.run(["sinfo", "-h", "-o", "%P %T %N"], capture_output=True, text=True)  # /etc/slurm's
    assert nodes.stdout.split() == ["debug*", "idle", "h1"], nodes.stdout + nodes.stderr
    assert subprocess.run(["srun", "-N1", "hostname"], capture_output=True, text=True).stdout.strip() == "h1"
    # a process of someone else's that names the cluster's files: `down` stops its daemons by their pid files only
    bystander = subprocess.Popen(["bash", "-c", "sleep 600", f"{STATE}/slurm/bystander"])
    try:
        assert run_script("down").returncode == 0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
    namespaces, daemons = cluster_state()
    assert not namespaces and not daemons and not STATE.exists()
    assert not Path("/etc/slurm/slurm.conf").exists()


def test_the_munge_key_is_never_readable_by_others(tmp_path: Path) -> None:
    """Its mode as it is handed to munge (the moment before its chmod) and after: owner only."""
    script = f"""STATE={tmp_path}; source {SCRIPT.parent / 'testcluster_slurm.sh'}; mkdir -p "$SLURM_DIR"
chown() {{ stat -c %a "$SLURM_DIR/munge.key" > {tmp_path}/mode-at-chown; command chown "$@"; }}
make_munge_key"""
    made = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "mode-at-chown").read_text().strip() == "600"
    assert oct((tmp_path / "slurm" / "munge.key").stat().st_mode & 0o777) == "0o400"


def test_slurm_needs_the_shared_filesystem() -> None:
    up = run_script("up", "1", "--slurm", "--private")
    assert up.returncode != 0
    assert up.stderr.strip() == \
        "testcluster: up: --slurm needs the shared filesystem (a Slurm job's files), not --private"
