"""scripts/testcluster.sh as a user meets it: `up` then `down` gives back the user's ~/.ssh/config and /etc/hosts as
they were, even when their last line has no newline; an `up` that fails halfway undoes what it made. The script
edits files of the test's own here (RINGFLOW_TESTCLUSTER_SSH_CONFIG, _HOSTS_FILE): the other cluster's tests use the
real ones meanwhile."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import quiet_env
from tests.tasks.launch.cluster_hosts import SCRIPT, STATE, STATES, cluster_state

pytestmark = pytest.mark.slow  # makes and removes network namespaces and sshd

USER_CONFIG = "Host build\n  HostName build.example\n  User me"  # no newline after the last line
USER_HOSTS = "127.0.0.1 localhost\n10.0.0.5 build"  # no newline after the last line
MARK = "# ringflow test cluster"


@dataclass(frozen=True)
class UserFiles:
    """A user's ssh config and hosts file, each ending without a newline, as the script meets them."""
    ssh_config: Path
    hosts: Path

    def run(self, *args: str, cluster: str = "h") -> subprocess.CompletedProcess:
        env = quiet_env() | {"RINGFLOW_TESTCLUSTER": cluster, "RINGFLOW_TESTCLUSTER_SSH_CONFIG": str(self.ssh_config),
                             "RINGFLOW_TESTCLUSTER_HOSTS_FILE": str(self.hosts)}
        return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env)

    def ssh(self, host: str, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", host, *command],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)


@pytest.fixture
def files(tmp_path: Path) -> Iterator[UserFiles]:
    """The user's files; no cluster h up before or after (cluster h's modules run one after another)."""
    made = UserFiles(tmp_path / "ssh" / "config", tmp_path / "hosts")
    made.ssh_config.parent.mkdir(mode=0o700)
    made.ssh_config.write_text(USER_CONFIG)
    made.hosts.write_text(USER_HOSTS)
    made.run("down")
    yield made
    made.run("down")


def test_up_then_down_gives_back_the_user_s_files(files: UserFiles) -> None:
    up = files.run("up", "1")
    assert up.returncode == 0, up.stderr
    config = files.ssh_config.read_text()
    # the user's line left whole; the host by its address (no name service needed)
    assert config.startswith(USER_CONFIG + "\n" + MARK + " begin\nHost h1\n  HostName 10.77.0.11\n"), config
    assert files.hosts.read_text() == USER_HOSTS + "\n" + MARK + " begin\n10.77.0.11 h1\n" + MARK + " end\n"
    assert files.ssh("h1", "hostname").stdout.strip() == "h1"
    assert files.run("down").returncode == 0
    assert files.ssh_config.read_text().rstrip("\n") == USER_CONFIG
    assert files.hosts.read_text().rstrip("\n") == USER_HOSTS


def test_an_up_that_fails_halfway_undoes_what_it_made(files: UserFiles) -> None:
    """The second host's link name is taken (as by a leftover of another tool): h1 was made, h2 cannot be."""
    subprocess.run(["ip", "link", "add", "rfvh2", "type", "bridge"], check=True)
    try:
        up = files.run("up", "2")
    finally:
        subprocess.run(["ip", "link", "delete", "rfvh2"], capture_output=True)
    assert up.returncode != 0 and "up failed; undoing what it made" in up.stderr
    namespaces, daemons = cluster_state()
    assert not namespaces and not daemons and not STATE.exists()
    assert files.hosts.read_text().rstrip("\n") == USER_HOSTS
    assert files.ssh_config.read_text() == USER_CONFIG


def test_a_second_cluster_beside_the_first_is_its_own(files: UserFiles) -> None:
    """f1 (cluster f: the suite runs cluster g's tests meanwhile) comes up beside h1 with its own name, address and
    files; its `down` leaves h1 whole."""
    assert files.run("up", "1").returncode == 0
    try:
        up = files.run("up", "1", cluster="f")
        assert up.returncode == 0 and up.stdout.split() == ["f1"], up.stderr
        assert files.ssh("f1", "hostname").stdout.strip() == "f1"
        assert files.ssh("h1", "hostname").stdout.strip() == "h1"
        assert files.ssh("f1", "hostname", "-I").stdout.split() == ["10.77.2.11"]
        refused = files.run("up", "1", "--slurm", cluster="f")  # one slurm.conf per machine
        assert refused.stderr.strip() == "testcluster: up: --slurm is cluster h's (one slurm.conf per machine)"
        assert files.run("down", cluster="f").returncode == 0
        assert cluster_state("f") == ([], "") and not STATES["f"].exists()
        assert files.ssh("h1", "true").returncode == 0 and "h1" in files.hosts.read_text()
        assert "f1" not in files.hosts.read_text() and "f1" not in files.ssh_config.read_text()
    finally:
        files.run("down", cluster="f")


def test_up_with_slurm_then_down_leaves_no_daemon_and_no_slurm_conf(files: UserFiles) -> None:
    up = files.run("up", "1", "--slurm")
    assert up.returncode == 0, up.stderr
    nodes = subprocess.run(["sinfo", "-h", "-o", "%P %T %N"], capture_output=True, text=True)  # /etc/slurm's
    assert nodes.stdout.split() == ["debug*", "idle", "h1"], nodes.stdout + nodes.stderr
    assert subprocess.run(["srun", "-N1", "hostname"], capture_output=True, text=True).stdout.strip() == "h1"
    # a process of someone else's that names the cluster's files: `down` stops its daemons by their pid files only
    bystander = subprocess.Popen(["bash", "-c", "sleep 600", f"{STATE}/slurm/bystander"])
    try:
        assert files.run("down").returncode == 0
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


def test_slurm_needs_the_shared_filesystem(files: UserFiles) -> None:
    up = files.run("up", "1", "--slurm", "--private")
    assert up.returncode != 0
    assert up.stderr.strip() == \
        "testcluster: up: --slurm needs the shared filesystem (a Slurm job's files), not --private"
