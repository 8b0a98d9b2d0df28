"""Cluster backends: one process per TF_CONFIG task, placed on the listed hosts' slots, started over ssh on another
host with only the named variables, servers for parameter-server, ports in port_hosts' order."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from tasks.launch.launchers.cluster import (
    FORWARDED_OVER_SSH,
    LAUNCHER,
    PS_SERVER,
    UNPICKED_PORT,
    cluster_addresses,
    cluster_placement,
)
from tasks.params import Params
from trainer.config import TrainParams

CONFIG = Path("/jobs/run/trainer_config.json")


def params(**train: object) -> Params:
    return Params(train=TrainParams(**train))


def test_workers_fill_the_listed_slots_in_turn_then_this_machine() -> None:
    placed = cluster_placement(params(backend="multiworker", np=3, hosts="h1.invalid:1,h2.invalid:1"))
    assert placed["worker"][:2] == ["h1.invalid", "h2.invalid"] and len(placed) == 1
    assert placed["worker"][2] not in ("h1.invalid", "h2.invalid")  # the head, as the hosts reach it


def test_parameter_server_puts_servers_coordinator_and_dispatcher_here() -> None:
    placed = cluster_placement(params(backend="parameter-server", np=2, num_ps=2))
    assert placed == {"worker": ["localhost"] * 2, "ps": ["localhost"] * 2, "chief": ["localhost"],
                      "data_dispatcher": ["localhost"]}
    assert LAUNCHER.port_hosts(params(backend="parameter-server", np=2, num_ps=2)) == ["localhost"] * 6


def test_ports_are_taken_in_port_hosts_order_and_the_dispatcher_is_set_apart() -> None:
    train = params(backend="parameter-server", np=1)
    cluster, extra = cluster_addresses(train, [7001, 7002, 7003, 7004])
    assert cluster == {"worker": ["localhost:7001"], "ps": ["localhost:7002"], "chief": ["localhost:7003"]}
    assert extra == {"data_dispatcher": "localhost:7004"}
    unpicked, _ = cluster_addresses(train, None)
    assert unpicked["worker"] == [f"localhost:{UNPICKED_PORT}"]


def test_servers_run_the_server_module_and_only_the_chief_waits_as_the_trainer() -> None:
    launched = LAUNCHER.processes(params(backend="parameter-server", np=1), None, CONFIG, {}, [1, 2, 3, 4])
    assert [(process.label, process.waited) for process in launched] == [("worker0", False), ("ps0", False),
                                                                         ("chief0", True)]
    assert launched[0].command[:len(PS_SERVER)] == PS_SERVER and launched[-1].command[-2:] == ["--config",
                                                                                              str(CONFIG)]
    assert json.loads(launched[1].env["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}


def test_a_worker_on_another_host_gets_only_the_named_variables_over_ssh() -> None:
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "SECRET_OF_THE_HEAD": "x", "PYTHONPATH": "/code"}
    remote, _ = LAUNCHER.processes(params(backend="multiworker", np=2, hosts="h1.invalid:1"), None, CONFIG, env, [5, 6])
    assert remote.command[0] == "ssh" and remote.hosts == ("h1.invalid",)
    shell = remote.command[-1]
    assert "SECRET_OF_THE_HEAD" not in shell and "TF_CPP_MIN_LOG_LEVEL=2" in shell
    assert "TF_CONFIG=" + shlex.quote(remote.env["TF_CONFIG"]) in shell and "TF_CONFIG" in FORWARDED_OVER_SSH
