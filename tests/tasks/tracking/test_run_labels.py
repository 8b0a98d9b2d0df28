"""What makes runs comparable in MLflow's UI: names, the Source column, params by section, the dataset input, the
experiment's kind and the system metrics, in a real SQLite store."""
from __future__ import annotations

import json
import time

import pytest

from tasks.params import load_params
from tasks.tracking import mlflow_store
from tasks.tracking.run_labels import RunSource, dataset_input, flow_source, run_name, source_tags, system_metrics
from tests import helpers

MANIFEST = {"source": "digits", "image_shape": [8, 8, 1], "num_classes": 10,
            "splits": {"train": {"count": 1257, "shards": []}, "validation": {"count": 270, "shards": []},
                       "test": {"count": 270, "shards": []}}}


def test_a_run_is_named_for_its_model_np_global_batch_learning_rate_and_id() -> None:
    params = load_params({"train.model": "small_cnn", "train.np": "4", "train.batch_size": "32",
                          "train.learning_rate": "0.0005"})
    assert run_name(params, "3f9a2c11d0e4") == "small_cnn-np4-b128-lr0.0005-3f9a2c"


def test_the_global_batch_in_a_run_s_name_is_the_backend_s() -> None:
    """train.batch_size is per replica: mirrored has one per GPU of its host (np logical CPUs without one),
    one-device and parameter-server step one replica's batch."""
    def name(backend: str, gpus_per_host: int = 0) -> str:
        params = load_params({"train.backend": backend, "train.np": "4", "train.batch_size": "32"})
        return run_name(params, "3f9a2c11d0e4", gpus_per_host).split("-")[2]
    assert [name("mirrored", 8), name("mirrored"), name("one-device"), name("parameter-server")] == \
        ["b256", "b128", "b32", "b32"]


def test_the_source_is_the_flow_or_the_deployment_that_started_the_run() -> None:
    assert flow_source("training-pipeline", None) == RunSource("flow training-pipeline", "LOCAL")
    assert flow_source("training-pipeline", "train") == RunSource("training-pipeline/train", "JOB")
    from tasks.project import ringflow_version
    from tasks.versioning.dvc import repository_url
    assert source_tags(RunSource("flow f"), "abc") == {"mlflow.source.name": "flow f", "mlflow.source.type": "LOCAL",
                                                       "mlflow.source.git.commit": "abc",
                                                       "mlflow.source.git.repoURL": repository_url(),
                                                       "ringflow.version": ringflow_version()}


def test_the_prepared_data_is_the_run_s_dataset_input(shared_store: str) -> None:
    experiment = f"labels-{time.monotonic_ns()}"
    run_id = mlflow_store.start_run(experiment, {}, {})
    given = dataset_input(load_params({}), "4a07ae6889f2c0ffee.dir", "data/prepared", MANIFEST)
    mlflow_store.client().log_inputs(run_id, [given])
    (logged,) = mlflow_store.client().get_run(run_id).inputs.dataset_inputs
    assert (logged.dataset.name, logged.dataset.digest) == ("digits", "4a07ae6889f2c0ffee.dir")
    assert json.loads(logged.dataset.profile)["splits"] == {"train": 1257, "validation": 270, "test": 270}
    assert json.loads(logged.dataset.source) == {"dataset": "digits", "prepared": "data/prepared",
                                                 "dvc_hash": "4a07ae6889f2c0ffee.dir"}
    assert {(tag.key, tag.value) for tag in logged.tags} == {("mlflow.data.context", "training")}


def test_an_experiment_is_marked_as_model_training_also_when_it_was_made_before(shared_store: str) -> None:
    name = f"kind-{time.monotonic_ns()}"
    made_before = mlflow_store.client().create_experiment(name)
    assert mlflow_store.experiment_id(name) == made_before
    assert mlflow_store.client().get_experiment(made_before).tags["mlflow.experimentKind"] == \
        "custom_model_development"
    new = mlflow_store.experiment_id(name + "-new")
    assert mlflow_store.client().get_experiment(new).tags["mlflow.experimentKind"] == "custom_model_development"


def test_system_metrics_are_sampled_into_the_run_while_the_block_runs(shared_store: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    run_id = mlflow_store.start_run(f"system-{time.monotonic_ns()}", {}, {})
    def sampled() -> int:
        return len(mlflow_store.client().get_metric_history(run_id, "system/cpu_utilization_percentage"))
    with system_metrics(run_id):
        helpers.wait_until(lambda: sampled() >= 2, 60)  # every 0.2 s; a loaded machine took longer than 1.5 s
    assert sampled() >= 2
