"""Elastic training's launch side: the discovery script, horovodrun's elastic arguments, the parameters and the
preflight lines; and a real elastic job on this machine that resumes from its checkpoint."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tasks.launch.job import train
from tasks.launch.launchers.horovodrun import horovod_command
from tasks.launch.preflight import PreflightError, check_launch
from tasks.launch.remote.discovery import DISCOVERY_SCRIPT_NAME, write_discovery_script
from tasks.params import Params, ParamsError, TrainParams, load_params
from trainer.config import ElasticParams
from trainer.protocol import elastic_starts, resumed_epochs, weights_digests

ELASTIC = ElasticParams(min_np=1, max_np=2)


def test_the_generated_discovery_script_lists_this_machine_and_the_hosts_that_answer(tmp_path: Path) -> None:
    script = write_discovery_script({"localhost": 2, "nosuchhost.invalid": 4}, tmp_path)
    listed = subprocess.run([str(script)], capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0 and listed.stdout == "localhost:2\n"


def test_an_elastic_launch_names_the_size_range_and_the_discovery_script(tmp_path: Path) -> None:
    params = Params(train=TrainParams(np=2, elastic=ELASTIC))
    command = horovod_command(params, "gloo", tmp_path / "trainer_config.json")
    text = " ".join(command)
    assert f"--min-np 1 --max-np 2 --host-discovery-script {tmp_path / DISCOVERY_SCRIPT_NAME}" in text
    assert "--blacklist-cooldown-range 10 300" in text and "-H " not in text
    assert "--network-interface lo" in text  # one host: Horovod's own interface search needs two


@pytest.mark.parametrize(("overrides", "message"), [
    ({"train.elastic": "{min_np: 3, max_np: 2}"}, "bad parameter train.elastic: min_np 3 exceeds max_np 2"),
    ({"train.elastic": "{min_np: 1}"}, "bad parameter train.elastic.max_np: Field required"),
    ({"train.elastic": "{min_np: 1, max_np: 2}", "train.np": "3"},
     "bad parameter train: np 3 (the start size) is outside elastic min_np 1 .. max_np 2"),
    ({"train.elastic": "{min_np: 1, max_np: 2, cooldown_seconds: [0, 5]}"},
     "bad parameter train.elastic: cooldown_seconds needs 1 <= low <= high <= 3600"),
])
def test_bad_elastic_parameters_are_one_line(overrides: dict, message: str) -> None:
    with pytest.raises(ParamsError, match=f"^{re.escape(message)}"):
        load_params(overrides)


def test_elastic_parameters_from_the_command_line() -> None:
    elastic = load_params({"train.elastic": "{min_np: 1, max_np: 4}"}).train.elastic
    assert (elastic.min_np, elastic.max_np, elastic.cooldown_seconds) == (1, 4, (10, 300))


@pytest.mark.parametrize(("train_params", "message"), [
    ({"backend": "horovod-tape"}, "train.elastic needs backend horovod (Keras fit in Horovod's elastic loop), "
                                  "not horovod-tape"),
    ({"controller": "mpi"}, "train.elastic needs the Gloo controller (Horovod's elastic mode has no MPI)"),
    ({"elastic": ElasticParams(min_np=1, max_np=2, discovery_script="/no/such/script")},
     "train.elastic.discovery_script /no/such/script is not an executable file"),
])
def test_preflight_names_what_keeps_a_job_from_training_elastically(digits_data: Path, train_params: dict,
                                                                   message: str) -> None:
    params = Params(train=TrainParams(np=2, **({"elastic": ELASTIC} | train_params)))
    with pytest.raises(PreflightError, match=f"^{re.escape(message)}"):
        check_launch(params, digits_data)


@pytest.mark.slow  # real horovodrun in elastic mode
def test_an_elastic_job_on_this_machine_trains_and_resumes_from_its_checkpoint(digits_data: Path,
                                                                              tmp_path: Path) -> None:
    lines: list[str] = []
    for epochs in (2, 3):
        params = Params(train=TrainParams(np=2, epochs=epochs, tensorboard=False, elastic=ELASTIC))
        result = train(params, digits_data, tmp_path / f"model{epochs}", tmp_path / "checkpoints", None, lines.append)
    text = "\n".join(lines)
    assert 2 in resumed_epochs(text) and (2, 3) in elastic_starts(text), text
    assert result.summary["resumed_from_epoch"] == 2 and result.summary["history"]["world_size"] == [2.0]
    digests = [digest for _, digest in weights_digests(text)]
    assert len(digests) == 4 and digests[2] == digests[3]
