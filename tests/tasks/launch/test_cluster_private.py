"""No shared filesystem, on the test cluster with `--private` hosts: each has its own data/, outputs/, mlruns/ and
/tmp (the code and .venv at the same path, as if installed there alike). The head node ships the data and the job's
files, brings rank 0's results back, and logs rank 0's metrics itself."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.job import train
from tasks.launch.preflight import PreflightError, check_launch
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from tests.helpers import ROOT
from tests.tasks.launch.cluster_hosts import STATE, cluster_up, on_host, ranks_on
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
