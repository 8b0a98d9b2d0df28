"""The job's configuration file: the launcher writes the resolved params once, every process reads the same."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.launch.job_config import job_spec, write_trainer_config
from tasks.params import Params, load_params
from trainer.config import JobSpec, TrainParams, read_config, write_config


def test_the_file_holds_the_resolved_params_and_the_job(digits_data: Path, tmp_path: Path) -> None:
    params = load_params({"train.epochs": "3", "input.image_size": "64", "batch_size": "16"})
    written = write_trainer_config(params, job_spec(params, digits_data, tmp_path / "model", tmp_path / "ckpt"))
    config = read_config(written)
    assert config.train == params.train and config.input == params.input
    assert (config.train.epochs, config.train.batch_size, config.input.image_size) == (3, 16, 64)
    assert config.job.augment is False  # auto, on 8x8 digits
    assert config.job.checkpoint_dir == tmp_path / "ckpt" and config.job.data_dir == digits_data
    assert len(config.job.checkpoint_owner) == 16
    document = json.loads(written.read_text())
    assert document["data"] == params.data.model_dump(mode="json")  # the whole run, as logged to MLflow


def test_a_file_the_processes_cannot_read_is_never_written(tmp_path: Path) -> None:
    sections = Params().model_dump(mode="json")
    sections["train"]["epochs"] = 0
    job = JobSpec(data_dir=tmp_path, out_dir=tmp_path, checkpoint_dir=tmp_path, checkpoint_owner="x", augment=False,
                  data_fingerprint="f", metrics_retry_seconds=60)
    with pytest.raises(ValidationError, match="epochs"):
        write_config(sections, job, tmp_path / "config.json")
    assert not (tmp_path / "config.json").exists()


@pytest.mark.parametrize("name", ["eth0", "enp0s31f6", "br-lan.100", "wlan0@if3", "eth0:1", "ib0"])
def test_a_network_interface_name_is_taken(name: str) -> None:
    assert TrainParams(network_interface=name).network_interface == name


@pytest.mark.parametrize("name", ["eth0;touch /tmp/pwned", "$(id)", "eth0 -x", "-x", "a/b", "x" * 16, "`id`", ""])
def test_anything_else_is_refused_as_a_network_interface(name: str) -> None:
    with pytest.raises(ValidationError, match="is not a network interface name"):
        TrainParams(network_interface=name)
