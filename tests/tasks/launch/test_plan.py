"""The launch plan: every process of a job, its command, environment and hosts, as its backend's launcher starts
it; pure (it contacts no host), so a dry run prints it. Also each input pipeline's share of the data."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tasks.launch.launchers.horovodrun import HOROVODRUN
from tasks.launch.plan import (
    data_plan_lines,
    describe_launch,
    launch_plan,
    listening_lines,
    port_hosts,
    training_data_plan,
)
from tasks.params import Params
from trainer.config import TrainParams
from trainer.protocol import HEARTBEAT_ENV

CONFIG = Path("/jobs/run 1/trainer_config.json")
TRAINER = [sys.executable, "-m", "trainer", "--config", str(CONFIG)]
# a training split of 400 records in 4 shards
MANIFEST = {"splits": {"train": {"count": 400, "shards": [{"count": 100}] * 4}}}


def params(**train: object) -> Params:
    return Params(train=TrainParams(**train))


@pytest.mark.parametrize(("train", "hosts"), [
    ({}, []),  # horovodrun: no servers
    ({"backend": "mirrored"}, []),
    ({"backend": "multiworker", "hosts": "h1:1,h2:1"}, ["h1", "h2"]),
    ({"backend": "parameter-server", "np": 2, "num_ps": 2}, ["localhost"] * 6),  # 2 workers, 2 ps, chief, dispatcher
])
def test_a_port_is_picked_on_the_host_of_every_server(train: dict, hosts: list[str]) -> None:
    assert port_hosts(params(**train)) == hosts


@pytest.mark.parametrize(("stall", "beat"), [(60, "15"), (10, "2.5"), (0, "0")])
def test_every_process_is_told_its_heartbeat_a_quarter_of_the_stall_time(stall: int, beat: str) -> None:
    for backend in ("horovod", "mirrored", "multiworker"):
        processes = launch_plan(params(backend=backend, stall_timeout_seconds=stall), "gloo", CONFIG, {"A": "1"})
        assert all(process.env[HEARTBEAT_ENV] == beat and process.env["A"] == "1" for process in processes)


@pytest.mark.parametrize(("given", "expected"), [({}, "1"), ({"OMPI_MCA_mpi_yield_when_idle": "0"}, "0")])
def test_mpi_ranks_yield_while_they_wait_unless_the_user_says_otherwise(given: dict, expected: str) -> None:
    (process,) = launch_plan(params(np=2), "mpi", CONFIG, {"PATH": "/usr/bin", **given})
    assert process.env["OMPI_MCA_mpi_yield_when_idle"] == expected


def test_a_horovod_job_is_one_horovodrun_over_the_hosts_running_the_trainer() -> None:
    (process,) = launch_plan(params(np=3, hosts="h1:2,h2:2"), "gloo", CONFIG, {})
    assert process.command[:6] == [*HOROVODRUN, "--gloo", "-np", "3", "-H"] and process.command[6] == "h1:2,h2:2"
    assert process.command[-5:] == TRAINER
    assert process.label is None and process.waited and process.hosts == ("h1", "h1", "h2")


def test_a_horovod_job_needs_a_controller() -> None:
    with pytest.raises(ValueError, match="needs Horovod's controller"):
        launch_plan(params(), None, CONFIG, {})


def test_a_one_process_backend_runs_rank_0_here() -> None:
    (process,) = launch_plan(params(backend="mirrored", np=4), None, CONFIG, {})
    assert (process.command, process.label, process.hosts) == (TRAINER, "0", ("localhost",))


def test_cluster_workers_get_the_picked_ports_in_their_tf_config() -> None:
    processes = launch_plan(params(backend="multiworker", np=2), None, CONFIG, {}, [5001, 5002])
    assert [process.label for process in processes] == ["0", "1"]
    configs = [json.loads(process.env["TF_CONFIG"]) for process in processes]
    assert all(config["cluster"] == {"worker": ["localhost:5001", "localhost:5002"]} for config in configs)
    assert [config["task"] for config in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]


def test_the_launch_is_described_per_rank_for_horovod() -> None:
    (line,) = describe_launch(params(np=2), "gloo", CONFIG)
    where, command = line.split(": ", 1)
    assert where == "rank 0 on localhost, rank 1 on localhost"
    assert shlex.split(command)[:5] == [*HOROVODRUN, "--gloo", "-np", "2"] and shlex.split(command)[-5:] == TRAINER


def test_the_launch_is_described_per_task_for_a_cluster_with_ports_left_to_the_launch() -> None:
    lines = describe_launch(params(backend="parameter-server", np=1), None, CONFIG)
    assert [line.split(": ", 1)[0] for line in lines] == ["worker0 on localhost", "ps0 on localhost",
                                                          "chief0 on localhost"]
    assert lines[-1].split(": ", 1)[1] == shlex.join(TRAINER)  # the quoted path is one word
    remote = describe_launch(params(backend="multiworker", hosts="h1.invalid:1", np=1), None, CONFIG)
    assert remote[0].startswith("0 on h1.invalid: ssh ") and "h1.invalid:<port>" in remote[0]


@pytest.mark.parametrize(("train", "gpus", "records", "batch"), [
    ({"np": 2}, 0, (200, 200), 32),  # a pipeline per rank, a rank's batch each
    ({"np": 3}, 0, (133, 133, 134), 32),
    ({"backend": "mirrored", "np": 2}, 0, (400,), 64),  # one pipeline feeding both replicas
    ({"backend": "multiworker", "np": 2}, 4, (200, 200), 32),  # one GPU of the host's 4 each
    ({"backend": "parameter-server", "np": 3}, 0, (400,), 32),  # one worker's step, from one shared pipeline
])
def test_the_training_split_is_cut_per_input_pipeline_with_its_share_of_the_global_batch(
        train: dict, gpus: int, records: tuple[int, ...], batch: int) -> None:
    plan = training_data_plan(params(**train), MANIFEST, gpus)
    assert (plan.records, plan.batch_size) == (records, batch)


def test_the_data_plan_is_one_line_per_rank() -> None:
    assert data_plan_lines(params(np=2), MANIFEST, 0) == [
        "rank 0: 200 training records, 6 steps of 32, 8 dropped per epoch",
        "rank 1: 200 training records, 6 steps of 32, 8 dropped per epoch"]


def test_parameter_server_workers_are_said_to_share_one_pipeline() -> None:
    assert data_plan_lines(params(backend="parameter-server", np=3), MANIFEST, 0) == [
        "the 3 workers together (tf.data service, each batch to one worker): 400 training records, 12 steps of 32, "
        "16 dropped per epoch"]


@pytest.mark.parametrize(("train", "controller", "lines"), [
    ({"backend": "mirrored"}, None, ["listens: nothing (no process opens a port)"]),
    ({"hosts": "h1:1,h2:1", "network_interface": "eth1"}, "gloo",
     ["listens: horovodrun's rendezvous (HTTP) on this machine, every interface (Horovod binds it so), for the job",
      "listens: Gloo between the ranks on h1, h2, interface eth1, for the job"]),
    ({}, "mpi", ["listens: Open MPI's daemons and the ranks' TCP transport on localhost, every interface (Open MPI "
                 "binds them so; traffic over lo), for the job"]),
    ({"hosts": "h1:1,h2:1"}, "mpi", ["listens: Open MPI's daemons and the ranks' TCP transport on h1, h2, every "
                                     "interface (Open MPI binds them so; traffic over the interfaces Horovod finds "
                                     "routable), for the job"]),
    ({"backend": "multiworker", "hosts": "h1:1,h2:1"}, None,
     ["listens: TensorFlow gRPC servers, every interface (TensorFlow binds 0.0.0.0): worker0 on h1, worker1 on h2, "
      "for the job"]),
    ({"backend": "parameter-server", "np": 1}, None,
     ["listens: TensorFlow gRPC servers, every interface (TensorFlow binds 0.0.0.0): worker0 on localhost, ps0 on "
      "localhost, chief0 on localhost, for the job",
      "listens: the tf.data service, every interface: its dispatcher on localhost, a data worker with each worker, "
      "for the job"]),
])
def test_the_ports_a_job_opens_are_said_before_it_starts(train: dict, controller: str | None,
                                                        lines: list[str]) -> None:
    assert listening_lines(params(**train), controller) == lines
