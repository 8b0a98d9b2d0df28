"""Parameters that reach a command line: taken from params.yaml and --set, refused from a deployment run's overrides
unless the deployment allows them in prefect.yaml."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.params import ParamsError
from tasks.passthrough import PREFECT_FILE, allows_passthrough, check_deployment_overrides, passthrough_overridden

PREFECT_YAML = """
deployments:
  - name: train
    entrypoint: flows/pipeline.py:training_pipeline
  - name: cluster
    entrypoint: flows/pipeline.py:training_pipeline
    allow_passthrough: true
  - name: quoted
    allow_passthrough: "true"
"""
ELASTIC = {"min_np": 1, "max_np": 2, "discovery_script": "/tmp/evil.sh"}


@pytest.fixture()
def prefect_file(tmp_path: Path) -> Path:
    path = tmp_path / "prefect.yaml"
    path.write_text(PREFECT_YAML)
    return path


@pytest.mark.parametrize(("overrides", "keys"), [
    ({"train.horovodrun_args": ["--verbose"]}, ["train.horovodrun_args"]),
    ({"train.horovodrun_args": '["--mpi-args=--x"]'}, ["train.horovodrun_args"]),
    ({"train.elastic": ELASTIC}, ["train.elastic.discovery_script"]),
    ({"train.epochs": 3, "train.network_interface": "eth0", "input.augment": "off"}, []),
    ({"train.elastic": ELASTIC | {"discovery_script": None}}, []),
    # code to import and call, named by whoever starts the run; a catalog model or a Keras loss is no code
    ({"train.model": "subprocess:run", "train.model_args": {"shell": True}}, ["train.model"]),
    ({"train.loss": "models/evil.py:loss"}, ["train.loss"]),
    ({"train.model": "small_cnn", "train.loss": "huber"}, []),
])
def test_the_keys_that_reach_a_command_are_found_in_any_form(overrides: dict[str, Any], keys: list[str]) -> None:
    assert [key for key, _ in passthrough_overridden(overrides)] == keys


def test_only_a_deployment_that_says_so_allows_them(prefect_file: Path) -> None:
    assert [allows_passthrough(name, prefect_file) for name in ("train", "cluster", "quoted", "nosuch")] == \
        [False, True, False, False]


def test_the_project_s_deployments_allow_none() -> None:
    assert not any(allows_passthrough(name) for name in ("train", "retrain"))
    assert PREFECT_FILE.is_file()


def test_a_deployment_run_s_pass_through_override_is_refused_in_one_line_naming_the_key(prefect_file: Path) -> None:
    with pytest.raises(ParamsError, match=r"^train\.elastic\.discovery_script: not taken from a deployment run's "
                                          r"overrides .* give deployment train `allow_passthrough: true`") as error:
        check_deployment_overrides({"train.elastic": ELASTIC}, "train", prefect_file)
    assert "\n" not in str(error.value) and error.value.bad_input


def test_a_deployment_run_naming_code_for_the_model_is_refused_in_one_line(prefect_file: Path) -> None:
    with pytest.raises(ParamsError, match=r"^train\.model: not taken from a deployment run's overrides \(it names "
                                          r"code to import and run\); set it in params\.yaml"):
        check_deployment_overrides({"train.model": "os.path:join"}, "train", prefect_file)
    check_deployment_overrides({"train.model": "os.path:join"}, "cluster", prefect_file)  # allowed there


@pytest.mark.parametrize("deployment", [None, "cluster"])
def test_the_command_line_and_an_allowing_deployment_take_them(prefect_file: Path, deployment: str | None) -> None:
    check_deployment_overrides({"train.horovodrun_args": ["--verbose"]}, deployment, prefect_file)
