"""horovodrun backends: one horovodrun over the hosts or hostfile, the stall check, the interface, elastic hosts
from the discovery script, Open MPI told twice that root may run it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.launch.launchers.horovodrun import (
    LAUNCHER,
    controller_environment,
    horovod_command,
    rank_interface,
    stall_arguments,
)
from tasks.params import Params
from trainer.config import TrainParams

CONFIG = Path("/jobs/run/trainer_config.json")


def command(**train: object) -> list[str]:
    return horovod_command(Params(train=TrainParams(**train)), "gloo", CONFIG)


@pytest.mark.parametrize(("seconds", "arguments"), [
    (0, ["--no-stall-check"]),
    (60, ["--stall-check-warning-time-seconds", "30", "--stall-check-shutdown-time-seconds", "60"]),
    (1, ["--stall-check-warning-time-seconds", "1", "--stall-check-shutdown-time-seconds", "2"]),
])
def test_the_stall_check_warns_at_half_and_stops_at_the_full_time(seconds: int, arguments: list[str]) -> None:
    assert stall_arguments(seconds) == arguments


def test_a_hostfile_is_read_once_and_passed_as_hosts(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the nodes\nnode1 slots=2\n\nnode2\tslots = 2\n")
    given = command(np=4, hostfile=str(hostfile))
    assert given[given.index("-H") + 1] == "node1:2,node2:2" and "-hostfile" not in given


def test_the_interface_and_extra_arguments_go_before_the_trainer() -> None:
    given = command(np=2, network_interface="eth0", horovodrun_args=["--verbose"])
    trainer = given.index("-m") - 1
    assert given[trainer - 3:trainer] == ["--network-interface", "eth0", "--verbose"]


def test_an_elastic_job_takes_its_hosts_from_the_discovery_script() -> None:
    given = command(np=2, elastic={"min_np": 1, "max_np": 2})
    assert "-H" not in given and "--host-discovery-script" in given
    assert given[given.index("--min-np") + 1] == "1" and given[given.index("--max-np") + 1] == "2"


def test_open_mpi_is_told_twice_only_for_root_and_mpi() -> None:
    root = os.geteuid() == 0
    assert bool(controller_environment("mpi")) == root and controller_environment("gloo") == {}


def test_the_job_is_one_horovodrun_whose_hosts_are_the_ranks_hosts() -> None:
    params = Params(train=TrainParams(np=3, hosts="h1:1,h2:2"))
    (process,) = LAUNCHER.processes(params, "gloo", CONFIG, {"A": "1"}, None)
    assert process.hosts == ("h1", "h2", "h2") and process.env == {"A": "1"} and process.label is None


@pytest.mark.parametrize(("train", "interface"), [
    ({}, "lo"),  # this machine alone: the ranks' connections stay on loopback
    ({"hosts": "localhost:1,127.0.0.1:1"}, "lo"),
    ({"network_interface": "eth0"}, "eth0"),  # the user's choice wins
    ({"hosts": "h1:1,h2:1"}, None),  # other hosts: Horovod finds a routable one
])
def test_a_job_on_this_machine_alone_talks_over_loopback(train: dict, interface: str | None) -> None:
    assert rank_interface(TrainParams(**train)) == interface
    command = horovod_command(Params(train=TrainParams(**train)), "gloo", Path("/job/c.json"))
    given = command[command.index("--network-interface") + 1] if "--network-interface" in command else None
    assert given == interface
