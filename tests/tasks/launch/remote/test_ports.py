"""A job's server ports: picked on the host that listens on them, and a port taken before its server started
costs a new launch, not the job."""
from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

import tasks.launch.job as job
from tasks.launch.job import train
from tasks.launch.remote.command import RemoteError
from tasks.launch.remote.ports import free_ports_on, pick_ports
from tasks.params import Params, TrainParams
from trainer.model_io import read_train_summary


def test_a_host_asked_for_several_ports_gets_different_free_ones() -> None:
    ports = pick_ports(["localhost", "127.0.0.1", "localhost", "localhost"])
    asked_of_localhost = [ports[0], ports[2], ports[3]]
    assert len(ports) == 4 and len(set(asked_of_localhost)) == 3  # one host's ports differ
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("", port))  # free on every address


def test_a_host_that_cannot_be_asked_for_ports_is_named() -> None:
    with pytest.raises(RemoteError, match=r"^host nowhere\.invalid cannot be reached by ssh without a password: ssh: "):
        free_ports_on("nowhere.invalid", 2)


@pytest.mark.slow  # a real parameter-server job on this machine
def test_a_server_whose_port_was_taken_is_launched_again_with_new_ports(digits_data: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first launch's worker 0 gets a port another process listens on: its gRPC server cannot start, and the
    job is launched again with ports picked anew, then trains."""
    taken = socket.create_server(("", 0))
    taken_port = taken.getsockname()[1]
    launches: list[list[int]] = []

    def first_worker_port_taken(hosts: list[str]) -> list[int]:
        ports = pick_ports(hosts)
        if not launches:
            ports[0] = taken_port  # the cluster's first task is worker 0
        launches.append(ports)
        return ports

    monkeypatch.setattr(job, "pick_ports", first_worker_port_taken)
    params = Params(train=TrainParams(backend="parameter-server", np=2, epochs=2, tensorboard=False))
    lines: list[str] = []
    with taken:
        train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    text = "\n".join(lines)
    assert len(launches) == 2 and taken_port not in launches[1]
    assert re.search(r"worker0 on \S+ could not listen on its port, taken on its host since the launch picked it "
                     r"\(exit 1\): .*Could not start gRPC server; launching again with new ports \(2 of 3\)", text), \
        text[-3000:]
    summary = read_train_summary(tmp_path / "model")
    assert summary["resumed_from_epoch"] == 0 and len(summary["history"]["loss"]) == 2  # trained, from the start
