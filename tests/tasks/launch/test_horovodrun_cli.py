"""horovodrun as the launcher runs it: how long an elastic job's driver waits on a connection."""
from __future__ import annotations

from pathlib import Path

from tasks.launch.horovodrun_cli import DRIVER_SOCKET_SECONDS, driver_socket_seconds
from tasks.launch.launchers.horovodrun import horovod_command
from tasks.params import Params, TrainParams
from trainer.config import ElasticParams


def test_an_elastic_driver_gives_up_on_a_silent_host_and_a_fixed_job_waits_as_horovod_does(tmp_path: Path) -> None:
    elastic = Params(train=TrainParams(np=2, elastic=ElasticParams(min_np=1, max_np=2)))
    fixed = Params(train=TrainParams(np=2))
    config = tmp_path / "trainer_config.json"
    assert driver_socket_seconds(horovod_command(elastic, "gloo", config)[2:]) == DRIVER_SOCKET_SECONDS
    assert driver_socket_seconds(horovod_command(fixed, "gloo", config)[2:]) is None
