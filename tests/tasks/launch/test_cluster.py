"""Multi-host for real, on the test cluster (scripts/testcluster.sh): hosts h1 and h2 are network namespaces of this
machine with their own hostnames, addresses and sshd; this machine is the head node and runs no rank."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.diagnosis import RankFailed
from tasks.launch.hosts import head_address, is_local
from tasks.launch.plan import launch_plan, rank_environment
from tasks.launch.preflight import PreflightError, preflight
from tasks.launch.train import job_spec, train, write_trainer_config
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from tests.helpers import ROOT, quiet_env

pytestmark = pytest.mark.slow  # real hosts, sshd and Horovod across them

SCRIPT = ROOT / "scripts" / "testcluster.sh"


def ranks_on(host: str) -> list[int]:
    """The training processes (ranks, workers, servers) running in a test-cluster host's network namespace."""
    pids = subprocess.run(["ip", "netns", "pids", f"rf-{host}"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in pids if b"-m\0trainer" in command_line(int(pid))]


def command_line(pid: int) -> bytes:
    """A process's command line; empty when it has just ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def cluster_state() -> tuple[str, str]:
    """The test cluster's namespaces and sshd processes, as the system lists them."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    daemons = subprocess.run(["pgrep", "-af", "ringflow-testcluster"], capture_output=True, text=True).stdout
    return namespaces, daemons


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    subprocess.run(["bash", SCRIPT, "down"], check=True)  # what an interrupted run may have left
    up = subprocess.run(["bash", SCRIPT, "up", "2"], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    yield up.stdout.split()
    subprocess.run(["bash", SCRIPT, "down"], check=True)
    namespaces, daemons = cluster_state()
    assert "rf-h" not in namespaces and not daemons  # nothing left behind


@pytest.mark.parametrize("interface", [None, "eth0"], ids=["interface-found", "interface-set"])
def test_horovod_trains_across_two_hosts_from_a_head_node(cluster: list[str], digits_data: Path, tmp_path: Path,
                                                          interface: str | None) -> None:
    assert cluster == ["h1", "h2"]
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=4, tensorboard=False,
                                      network_interface=interface))
    lines: list[str] = []
    result = train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    text = "\n".join(lines)
    assert re.search(r"rank 0 of 2 on h1\b", text) and re.search(r"rank 1 of 2 on h2\b", text), text[-2000:]
    digests = re.findall(r"weights_sha256 \S+ ([0-9a-f]{64})", text)
    assert len(digests) == 2 and digests[0] == digests[1]  # the allreduce kept both hosts' weights equal
    assert evaluate(result.model_dir, digits_data).metrics["test_accuracy"] >= 0.8



@pytest.mark.parametrize("backend", ["multiworker", "multiworker-tape", "parameter-server"])
def test_tf_distribute_trains_across_two_hosts(cluster: list[str], digits_data: Path, tmp_path: Path,
                                              backend: str) -> None:
    """Workers on h1 and h2; for parameter-server, the parameter server, the coordinator and the tf.data dispatcher
    on this machine, reached at its address on the hosts' network."""
    params = Params(train=TrainParams(backend=backend, np=2, hosts="h1:1,h2:1", epochs=4, tensorboard=False))
    lines: list[str] = []
    result = train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    assert ranks_on("h1") == [] and ranks_on("h2") == []  # workers and servers gone from both hosts
    if backend != "parameter-server":  # synchronous: both workers end with the same weights
        digests = re.findall(r"weights_sha256 task=worker:\d ([0-9a-f]{64})", "\n".join(lines))
        assert len(digests) == 2 and digests[0] == digests[1], lines[-10:]
    assert evaluate(result.model_dir, digits_data).metrics["test_accuracy"] >= 0.8

@pytest.mark.parametrize(("hosts", "np_", "expected"), [
    ("10.77.0.99:1,h1:1", 2, r"^host 10\.77\.0\.99 cannot be reached by ssh without a password: ssh: connect to "
                             r"host 10\.77\.0\.99 port 22: No route to host$"),
    ("h1:4", 4, r"^host h1 has \d+ cores for the 4 slots asked \(train\.hosts / train\.hostfile\)$"),
])
def test_preflight_names_the_host_that_cannot_run_ranks(cluster: list[str], digits_data: Path, hosts: str, np_: int,
                                                        expected: str) -> None:
    params = Params(train=TrainParams(np=np_, hosts=hosts, batch_size=8))
    with pytest.raises(PreflightError, match=expected) as error:
        preflight(params, digits_data)
    assert "\n" not in str(error.value)


def test_a_rank_killed_on_a_remote_host_fails_the_job_and_the_retry_resumes(cluster: list[str], digits_data: Path,
                                                                            tmp_path: Path) -> None:
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=40, tensorboard=False))
    lines: list[str] = []

    def kill_h2_after_epoch_2(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 2: ", line):
            for pid in ranks_on("h2"):
                os.kill(pid, signal.SIGKILL)
    with pytest.raises(RankFailed) as failure:
        train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, kill_h2_after_epoch_2)
    assert "h2" in str(failure.value) and failure.value.retryable, str(failure.value)
    assert ranks_on("h1") == [] and ranks_on("h2") == []  # no rank left on either host
    assert not any(re.search(r"epoch (1[0-9]|[4-9]): ", line) for line in lines)  # it failed within the epoch

    retry = params.model_copy(update={"train": params.train.model_copy(update={"epochs": 5})})
    lines.clear()
    train(retry, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    resumed = [int(m[1]) for line in lines if (m := re.search(r"resuming from checkpoint at epoch (\d+)", line))]
    assert resumed and resumed[0] >= 2, lines[-10:]  # at most the killed epoch was lost


def test_a_frozen_remote_rank_is_caught_by_the_stall_timeout_and_cleaned_up(cluster: list[str], digits_data: Path,
                                                                           tmp_path: Path) -> None:
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=40, tensorboard=False,
                                      stall_timeout_seconds=15))
    lines: list[str] = []

    def stop_h2_after_epoch_2(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 2: ", line):
            for pid in ranks_on("h2"):
                os.kill(pid, signal.SIGSTOP)  # a frozen host: its rank holds, nothing exits
    with pytest.raises(RankFailed) as failure:
        train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, stop_h2_after_epoch_2)
    assert re.match(r"rank 1 on h2 (stopped responding|stalled)", str(failure.value)), str(failure.value)
    assert failure.value.retryable
    assert ranks_on("h1") == [] and ranks_on("h2") == []  # the stopped rank too


def test_a_launcher_killed_hard_leaves_no_rank_on_any_host(cluster: list[str], digits_data: Path,
                                                           tmp_path: Path) -> None:
    """SIGKILL of horovodrun and its ssh clients (as when a cancelled flow run's process group is stopped): the
    remote ranks go too."""
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=50, tensorboard=False))
    config_file = write_trainer_config(params, job_spec(params, digits_data, tmp_path / "model", tmp_path / "ckpt"))
    (launcher,) = launch_plan(params, preflight(params, digits_data), config_file, rank_environment(None) | quiet_env())
    job = subprocess.Popen(launcher.command, env=launcher.env, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    for line in job.stdout:
        if "epoch 1:" in line:
            assert ranks_on("h1") and ranks_on("h2")
            os.killpg(job.pid, signal.SIGKILL)
            break
    job.wait()
    for _ in range(60):  # a bounded wait, not a speed goal
        if not ranks_on("h1") and not ranks_on("h2"):
            break
        time.sleep(0.5)
    assert ranks_on("h1") == [] and ranks_on("h2") == []


def test_this_machine_is_known_by_its_address_on_the_hosts_network(cluster: list[str]) -> None:
    assert head_address(["localhost"]) == "localhost"
    assert head_address(["h1", "h2"]) == "10.77.0.1" and is_local("10.77.0.1") and not is_local("h1")
