"""No shared filesystem, on the test cluster with `--private` hosts: each has its own data/, outputs/, mlruns/ and
/tmp (the code and .venv at the same path, as if installed there alike). The head node ships the data and the job's
files, brings rank 0's results back, and logs rank 0's metrics itself."""
from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.job import train
from tasks.launch.preflight import PreflightError, check_launch
from tasks.launch.remote.host_probe import SHIPPED_MARK
from tasks.launch.remote.shipping import ShippingError, data_key, shard_sums, ship_data
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from tests.helpers import ROOT
from tests.tasks.launch.cluster_hosts import STATE, cluster_up, command_line, on_host, ranks_on, set_link
from trainer.protocol import resumed_epochs, weights_digests

pytestmark = pytest.mark.slow  # real hosts, sshd and training across them


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[list[str]]:
    yield from cluster_up("--private")


def mlflow_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, str]:
    """A client on a store of the test's own, and a run in it."""
    from mlflow.tracking import MlflowClient
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # the store ringflow's side logs to
    client = MlflowClient(tracking_uri=uri)  # not mlflow's global one, which another test may have set
    return client, client.create_run(client.create_experiment("private")).info.run_id


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_horovod_trains_on_hosts_without_a_shared_filesystem(private_cluster: list[str], digits_data: Path,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             controller: str) -> None:
    assert on_host("h1", "test", "-e", str(tmp_path)).returncode == 1  # h1 does not see the files of this machine
    for host in ("h1", "h2"):  # as new hosts: without the data an earlier test shipped
        on_host(host, "rm", "-rf", str(digits_data))
    client, run_id = mlflow_run(tmp_path, monkeypatch)
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=3, controller=controller))
    lines: list[str] = []
    model_dir, checkpoints = tmp_path / "model", tmp_path / "checkpoints"
    result = train(params, digits_data, model_dir, checkpoints, run_id, lines.append)
    text = "\n".join(lines)
    assert "shipping the prepared data to h1" in text and "bringing rank 0's results back from h1" in text
    assert [m.step for m in client.get_metric_history(run_id, "accuracy")] == [0, 1, 2]  # logged by the head
    assert (model_dir / "tensorboard").is_dir() and (checkpoints / "checkpoint").is_file()
    assert evaluate(result.model_dir, digits_data).metrics["test_accuracy"] >= 0.8
    for host in ("h1", "h2"):  # nothing of the run stays there, and no process
        assert on_host(host, "ls", "-A", str(tmp_path)).stdout.split() == [], host
        assert ranks_on(host) == []
    if controller == "mpi":  # what follows is the head's shipping, the same for either controller
        return
    more = params.model_copy(update={"train": params.train.model_copy(update={"epochs": 5})})
    lines.clear()
    train(more, digits_data, model_dir, checkpoints, run_id, lines.append)
    text = "\n".join(lines)
    assert "shipping the prepared data" not in text  # the hosts kept this version of the data
    assert 3 in resumed_epochs(text), text[-2000:]  # from the checkpoints shipped back
    assert [m.step for m in client.get_metric_history(run_id, "accuracy")] == [0, 1, 2, 3, 4]


def test_multiworker_trains_on_hosts_without_a_shared_filesystem(private_cluster: list[str], digits_data: Path,
                                                                 tmp_path: Path) -> None:
    params = Params(train=TrainParams(backend="multiworker", np=2, hosts="h1:1,h2:1", epochs=3, tensorboard=False))
    lines: list[str] = []
    result = train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    digests = [digest for who, digest in weights_digests("\n".join(lines)) if who.startswith("task=worker:")]
    assert len(digests) == 2 and digests[0] == digests[1], lines[-10:]
    assert evaluate(result.model_dir, digits_data).metrics["test_accuracy"] >= 0.8


def test_a_shared_filesystem_promised_but_missing_is_one_preflight_line(private_cluster: list[str],
                                                                        digits_data: Path) -> None:
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", shared_fs=True))
    with pytest.raises(PreflightError, match=rf"^host h1 does not see this machine's checkout at {ROOT} "
                                             r"\(train.shared_fs: true\): set train.shared_fs to auto$"):
        check_launch(params, digits_data)


def test_a_host_without_the_python_is_one_preflight_line(private_cluster: list[str], digits_data: Path) -> None:
    """h2's own view of the disk loses the .venv (a host where ringflow was never installed)."""
    venv = str(ROOT / ".venv")
    sshd = (STATE / "h2" / "sshd.pid").read_text().strip()
    subprocess.run(["nsenter", "-t", sshd, "-m", "mount", "-t", "tmpfs", "tmpfs", venv], check=True)
    try:
        params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1"))
        with pytest.raises(PreflightError, match=rf"^host h2 has no Python at {venv}/bin/python: "):
            check_launch(params, digits_data)
    finally:
        subprocess.run(["nsenter", "-t", sshd, "-m", "umount", venv], check=True)


@contextlib.contextmanager
def slow_link(host: str, rate: str = "64kbit") -> Iterator[None]:
    """This machine's side of the host's link sends at `rate` (the data takes a while to arrive), then again at
    full speed."""
    link = f"rfv{host}"  # scripts/testcluster.sh's name for this machine's end of the host's link
    subprocess.run(["tc", "qdisc", "add", "dev", link, "root", "tbf", "rate", rate, "burst", "16kbit", "latency",
                    "400ms"], check=True)
    try:
        yield
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", link, "root"], check=True)


def end_lost_transfers(host: str, data_dir: Path) -> None:
    """The host's side of a transfer whose client was lost waits on its connection for ever (sshd sends no
    keep-alives by default): ended, with the copy it was receiving, so the next test meets a clean host."""
    pids = subprocess.run(["ip", "netns", "pids", f"rf-{host}"], capture_output=True, text=True).stdout.split()
    for pid in pids:
        if command_line(int(pid)).startswith(b"tar\0-xf\0-\0"):
            subprocess.run(["kill", "-KILL", pid], check=False)
    leftovers = f"{shlex.quote(str(data_dir.parent))}/.{shlex.quote(data_dir.name)}.incoming-*"
    on_host(host, f"rm -rf {leftovers}")


def test_a_host_lost_while_the_data_is_shipped_ends_the_step_in_one_line(private_cluster: list[str],
                                                                        digits_data: Path, tmp_path: Path) -> None:
    """h1's link is cut a few seconds into shipping the data (which takes over a minute at the link's rate): ssh's
    keep-alives end the transfer, and the step, with one line naming h1, instead of a wait for TCP's own timeout
    (hours) or the shipping limit (an hour). The bound below is a hang detector, not a speed goal."""
    for host in ("h1", "h2"):
        on_host(host, "rm", "-rf", str(digits_data))
    params = Params(train=TrainParams(np=2, hosts="h1:1,h2:1", epochs=1, controller="gloo"))
    lines: list[str] = []

    def cut_link_once_shipping(line: str) -> None:
        lines.append(line)
        if line == "shipping the prepared data to h1 (no shared filesystem)":
            threading.Timer(3, set_link, ("h1", "down")).start()

    started = time.monotonic()
    try:
        with slow_link("h1"), pytest.raises(ShippingError) as error:
            train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, cut_link_once_shipping)
    finally:
        set_link("h1", "up")
        end_lost_transfers("h1", digits_data)
    assert time.monotonic() - started < 120, lines
    # ssh says `Timeout, server h1 not responding.` at log level INFO; the test cluster's ssh config asks for ERROR
    assert re.fullmatch(r"host h1 (was lost \(shipping the data \S+\): Timeout, server h1 not responding\.|stopped "
                        r"answering ssh \(shipping the data \S+; ssh gave no reason\))", str(error.value)), \
        str(error.value)
    assert not (tmp_path / "model").exists()  # nothing that looks finished


def test_concurrent_launches_ship_to_a_host_each_into_its_own_copy(private_cluster: list[str],
                                                                   digits_data: Path) -> None:
    """Three launches ship the same data to h1 at once: each into its own incoming copy, checked against the
    manifest, put in place one at a time; h1 ends with the data whole and no copy left over."""
    leftovers = f"{shlex.quote(str(digits_data.parent))}/.{shlex.quote(digits_data.name)}.*"  # of a lost launch
    on_host("h1", "sh", "-c", f"rm -rf {shlex.quote(str(digits_data))} {leftovers}")
    key = data_key(digits_data)
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda _: ship_data("h1", digits_data, key), range(3)))
    listing = on_host("h1", "ls", "-A", str(digits_data.parent)).stdout.split()
    assert sorted(listing) == sorted([digits_data.name, f".{digits_data.name}.lock"]), listing
    sums = on_host("h1", f"cd {shlex.quote(str(digits_data))} && sha256sum -c --quiet --strict -",
                   input=shard_sums(digits_data))
    assert sums.returncode == 0 and on_host("h1", "cat", str(digits_data / SHIPPED_MARK)).stdout.strip() == key
