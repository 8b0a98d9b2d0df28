"""What a pipeline run records in MLflow: params by section, the state that lets a retraining skip, the
steady throughput, metric-safe class names, the gate's tags and the run's UI link."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.params import Params, load_params
from tasks.tracking import mlflow_store
from tasks.tracking.run_labels import section_params
from tasks.tracking.run_log import (
    STATE_TAG,
    last_finished_state,
    last_successful_run,
    metric_name,
    run_link,
    runs_link,
)
from tasks.versioning.run_state import RunState
from trainer.model_io import steady_images_per_sec


@pytest.fixture
def params(shared_store: str, tmp_path: Path) -> Params:
    name = f"log-{tmp_path.name}"
    mlflow_store.client().create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    return load_params({"tracking.experiment": name})


def test_every_param_that_shapes_the_model_goes_by_its_section_s_name() -> None:
    logged = section_params(load_params({"train.np": "3"}))
    assert logged["train.np"] == 3 and "train.epochs" in logged and "data.dataset" in logged
    assert "input.augment" in logged and {key.split(".")[0] for key in logged} == {"train", "data", "input"}


def test_a_retraining_finds_the_last_finished_run_of_the_same_state(params: Params) -> None:
    state = RunState("d", "c", "p")
    experiment = params.tracking.experiment
    assert last_successful_run(experiment, state) is None and last_finished_state(experiment) == {}
    failed = mlflow_store.start_run(experiment, {"data_hash": "d"}, {STATE_TAG: state.key})
    mlflow_store.end_run(failed, ok=False)
    done = mlflow_store.start_run(experiment, {"data_hash": "d", "code_digest": "c", "params_hash": "p"},
                                  {STATE_TAG: state.key})
    mlflow_store.end_run(done, ok=True)
    assert last_successful_run(experiment, state) == done
    assert last_successful_run(experiment, RunState("other", "c", "p")) is None
    assert last_finished_state(experiment) == {"data_hash": "d", "code_digest": "c", "params_hash": "p",
                                               "run_id": done}


@pytest.mark.parametrize(("per_epoch", "steady"), [([10.0, 100.0, 200.0], 150.0), ([40.0], 40.0), ([], 0.0)])
def test_the_steady_rate_leaves_out_the_first_epoch_when_there_are_more(per_epoch: list[float],
                                                                        steady: float) -> None:
    assert steady_images_per_sec({"images_per_sec": per_epoch}) == steady


def test_a_class_name_becomes_a_metric_key_mlflow_allows() -> None:
    assert metric_name("sea lion (adult)/2") == "sea_lion__adult_/2"


def test_the_run_link_is_the_ui_page_of_the_run_in_its_experiment(params: Params) -> None:
    experiment_id = mlflow_store.client().get_experiment_by_name(params.tracking.experiment).experiment_id
    assert run_link(params, "abc") == f"{params.tracking.ui_url}/#/experiments/{experiment_id}/runs/abc" \
                                      "?workflowType=machine_learning"  # MLflow 3.17's model-training view
    assert runs_link(params) == f"{params.tracking.ui_url}/#/experiments/{experiment_id}/runs" \
                                "?workflowType=machine_learning"
