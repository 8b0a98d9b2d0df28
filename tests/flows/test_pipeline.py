"""The whole pipeline on the built-in dataset with 2 Horovod ranks, in a private copy of the checkout.

The flow runs against a real Prefect server; MLflow, DVC and Horovod run for real. The run is the session's
`pipeline_run` (tests/pipeline_run.py; tests/tasks/versioning/test_dvc.py clones its checkout too).
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks.launch.output.communication import COMMUNICATION_TAG, HIGH_SHARE
from tests.helpers import BIN, PYTHON, api_call, copy_checkout, quiet_env, run
from tests.pipeline_run import PipelineRun
from trainer.models import build_model
from trainer.tuning import CPU_CYCLE_MS, usable_cores

pytestmark = pytest.mark.slow  # the whole pipeline: Prefect server, Horovod, DVC
TEST_GROUP = "the session's pipeline run"  # tests/pipeline_run.py: made once, on one worker (tests/parallel.py)

EPOCH_METRICS = ("loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec")


def mlflow_client(repo: Path):
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}")


def test_mlflow_run_holds_params_metrics_and_artifacts(pipeline_run: PipelineRun) -> None:
    client = mlflow_client(pipeline_run.repo)
    mlflow_run = client.get_run(pipeline_run.run_id)
    assert mlflow_run.info.status == "FINISHED"
    params = mlflow_run.data.params
    assert (params["train.np"], params["train.model"], params["train.epochs"]) == ("2", "cnn", "20")
    assert params["resolved.world_size"] == "2" and "data.dataset" in params and "input.augment" in params
    assert float(params["resolved.scaled_learning_rate"]) == pytest.approx(2 * float(params["train.learning_rate"]))
    assert mlflow_run.data.metrics["test_accuracy"] == pytest.approx(pipeline_run.test_accuracy, abs=1e-4)
    assert pipeline_run.test_accuracy >= 0.95
    assert "test_loss" in mlflow_run.data.metrics
    share = mlflow_run.data.metrics["allreduce_share"]  # np 2: the gradients' averaging timed against a step
    assert 0 < share <= 1 and mlflow_run.data.metrics["allreduce_ms"] > 0
    advice = mlflow_run.data.tags.get(COMMUNICATION_TAG)  # said, and tagged, when it is a high share
    assert (advice is not None) == (share >= HIGH_SHARE) and (advice is None or advice in pipeline_run.logged)
    threads = max(1, usable_cores() // 2)  # the first run of its config: each rank's share, Horovod's own buffer
    assert f"tuning: localhost ({usable_cores()} cores, 2 ranks): {threads} intra-op, {threads} inter-op, {threads} " \
           "tf.data thread(s) per rank; Horovod cycle 0.25 ms (the ranks' threads take the host's cores), fusion " \
           "buffer 128 MB (Horovod's own until a run of this config has logged its gradient)" in pipeline_run.logged
    trainable = build_model("cnn", (8, 8, 1), 10).count_params()
    assert {key: params[f"resolved.{key}"] for key in ("intra_op_threads", "inter_op_threads", "data_threads",
                                                       "cycle_time_ms", "fusion_threshold_mb", "gradient_bytes")} \
        == {"intra_op_threads": str(threads), "inter_op_threads": str(threads), "data_threads": str(threads),
            "cycle_time_ms": str(CPU_CYCLE_MS), "fusion_threshold_mb": "128", "gradient_bytes": str(4 * trainable)}
    for key in EPOCH_METRICS:
        assert [m.step for m in client.get_metric_history(pipeline_run.run_id, key)] == list(range(20)), key
    artifacts = {a.path for a in client.list_artifacts(pipeline_run.run_id)}
    assert {"model", "savedmodel", "params.resolved.yaml", "data", "evaluation"} <= artifacts
    data_files = {a.path for a in client.list_artifacts(pipeline_run.run_id, "data")}
    assert data_files == {"data/manifest.json", "data/validation.json"}


def test_the_next_run_of_the_config_sizes_horovod_s_fusion_buffer_from_the_gradient_this_one_logged(
        pipeline_run: PipelineRun) -> None:
    """What the next run's preflight finds in the project (its own process, the project's params.yaml)."""
    asked = ("from tasks.launch.tuning import last_gradient_bytes, tuning_line; from tasks.params import load_params; "
             "from tasks.paths import PREPARED_DIR; params = load_params(); "
             "print(tuning_line(params, {'localhost': 2}, 0, last_gradient_bytes(params, PREPARED_DIR)))")
    done = run([PYTHON, "-c", asked], pipeline_run.repo, quiet_env())
    gradient = 4 * build_model("cnn", (8, 8, 1), 10).count_params()
    assert done.stdout.rstrip().endswith(f"fusion buffer 128 MB (holds the model's {gradient / 2**20:.2g} MB gradient, "
                                         "as the last run of this config logged it)"), done.stdout + done.stderr


def test_the_run_is_worth_comparing_in_mlflow_s_ui(pipeline_run: PipelineRun) -> None:
    client = mlflow_client(pipeline_run.repo)
    mlflow_run = client.get_run(pipeline_run.run_id)
    experiment = client.get_experiment(mlflow_run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # opens on its training runs
    params, tags = mlflow_run.data.params, mlflow_run.data.tags
    global_batch = int(params["train.batch_size"]) * 2
    assert mlflow_run.info.run_name == f"cnn-np2-b{global_batch}-lr{float(params['train.learning_rate']):g}-" \
                                      f"{pipeline_run.run_id[:6]}"
    assert (tags["mlflow.source.name"], tags["mlflow.source.type"]) == ("flow training-pipeline", "LOCAL")
    assert tags["mlflow.source.git.commit"] == params["git_commit"]
    (dataset,) = mlflow_run.inputs.dataset_inputs
    assert (dataset.dataset.name, dataset.dataset.digest) == ("digits", params["data_hash"][:36])
    splits = json.loads(dataset.dataset.profile)["splits"]
    assert sum(splits.values()) == 1797 and set(splits) == {"train", "validation", "test"}
    system = [key for key in mlflow_run.data.metrics if key.startswith("system/")]
    assert "system/cpu_utilization_percentage" in system and "system/system_memory_usage_megabytes" in system


def test_run_records_data_hash_and_git_commit(pipeline_run: PipelineRun) -> None:
    params = mlflow_client(pipeline_run.repo).get_run(pipeline_run.run_id).data.params
    lock = yaml.safe_load((pipeline_run.repo / "dvc.lock").read_text())
    assert params["data_hash"] == lock["stages"]["prepare"]["outs"][0]["md5"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pipeline_run.repo, capture_output=True, text=True)
    assert params["git_commit"] == head.stdout.strip()


def test_dvc_status_is_clean_and_data_is_pushed(pipeline_run: PipelineRun) -> None:
    dvc = str(BIN / "dvc")
    status = run([dvc, "status"], pipeline_run.repo, quiet_env())
    assert status.returncode == 0 and "Data and pipelines are up to date." in status.stdout, status.stdout
    remote = run([dvc, "status", "--cloud", "prepare"], pipeline_run.repo, quiet_env())
    assert "Cache and remote 'local' are in sync." in remote.stdout, remote.stdout


def test_savedmodel_reloads_and_matches_the_trained_model(pipeline_run: PipelineRun) -> None:
    import tensorflow as tf

    from tests.helpers import read_split
    from trainer.model_io import load_model
    images, labels = read_split(pipeline_run.repo / "data" / "prepared", "test")
    serve = tf.saved_model.load(str(pipeline_run.savedmodel)).signatures["serving_default"]
    served = serve(images=tf.constant(images))
    trained = load_model(pipeline_run.repo / "outputs" / "model").predict(images, verbose=0)
    np.testing.assert_allclose(served["probabilities"].numpy(), trained, atol=1e-5)
    assert np.mean(served["classes"].numpy() == labels) >= 0.95


def test_rank_0_wrote_the_test_predictions_and_the_savedmodel_beside_the_model(pipeline_run: PipelineRun) -> None:
    model_dir = pipeline_run.repo / "outputs" / "model"
    assert {"test_predictions.npz", "parity_sample.npz", "savedmodel"} <= {path.name for path in model_dir.iterdir()}


def test_prefect_server_recorded_a_completed_flow_run(pipeline_run: PipelineRun, prefect_api: str) -> None:
    """This pipeline's flow run, and its artifacts (the session's server holds other tests' runs too)."""
    flow_run = api_call(prefect_api, f"/flow_runs/{pipeline_run.flow_run_id}")
    assert flow_run["state_type"] == "COMPLETED"
    task_runs = api_call(prefect_api, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run["id"]]}}})
    assert {"convert", "validate", "preflight", "version", "changes", "open-run", "train", "evaluate", "export",
            "register", "publish"} <= \
        {r["name"].rsplit("-", 1)[0] for r in task_runs}
    artifacts = api_call(prefect_api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}})
    validation = [a for a in artifacts if a["key"] == "data-validation"]
    assert len(validation) == 1 and "| train | 1257 | 8 |" in validation[0]["data"]


def test_dvc_repro_runs_the_same_steps_without_prefect(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["train"].update(epochs=2, np=1)  # the stages are what this tries: one rank trains as two would
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    done = run([str(BIN / "dvc"), "repro"], repo, quiet_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = json.loads((repo / "outputs" / "metrics.json").read_text())
    assert (repo / "outputs" / "savedmodel" / "saved_model.pb").is_file()
    run_id = json.loads((repo / "outputs" / "model" / "run.json").read_text())["run_id"]
    mlflow_run = mlflow_client(repo).get_run(run_id)
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.data.params["train.epochs"] == "2"
    assert mlflow_run.data.metrics["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    again = run([str(BIN / "dvc"), "status"], repo, quiet_env())
    assert "Data and pipelines are up to date." in again.stdout, again.stdout
    (repo / "models" / "my_net.py").write_text("def build(input_shape, outputs):\n    pass\n")  # a model file
    changed = run([str(BIN / "dvc"), "status", "train"], repo, quiet_env())
    assert re.search(r"modified:\s+models$", changed.stdout, re.M), changed.stdout  # dvc repro would train it


def test_restore_by_run_id_brings_back_that_runs_data(pipeline_run: PipelineRun) -> None:
    import shutil
    prepared = pipeline_run.repo / "data" / "prepared"
    manifest = (prepared / "manifest.json").read_bytes()
    shutil.rmtree(prepared)
    done = run([PYTHON, "-m", "tasks", "restore", "--run-id", pipeline_run.run_id], pipeline_run.repo, quiet_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert (prepared / "manifest.json").read_bytes() == manifest
    status = run([str(BIN / "dvc"), "status", "prepare"], pipeline_run.repo, quiet_env())
    assert "Data and pipelines are up to date." in status.stdout, status.stdout


def test_scaling_flow_reports_images_per_sec_and_efficiency(pipeline_run: PipelineRun, prefect_api: str) -> None:
    started_ms = int(time.time() * 1000)
    done = run([PYTHON, "-m", "flows.scaling", "--set", "epochs=2", "--set", "scaling_np=[1, 2]"],
               pipeline_run.repo, quiet_env(PREFECT_API_URL=prefect_api))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = dict(re.findall(r"^np=(\d): [\d,.]+ images/sec, efficiency ([\d.]+)$", done.stdout, re.M))
    assert set(shown) == {"1", "2"} and float(shown["1"]) == 1.0 and 0 < float(shown["2"]) < 1.5
    client = mlflow_client(pipeline_run.repo)
    experiment = client.get_experiment_by_name("ringflow").experiment_id
    (report,) = client.search_runs([experiment], "tags.`ringflow.kind` = 'scaling'")
    assert {a.path for a in client.list_artifacts(report.info.run_id)} == {"scaling.csv", "scaling.png"}
    (two,) = client.search_runs([experiment], "params.`train.np` = '2' and attributes.start_time >= "
                                 f"{started_ms}")
    assert two.data.metrics["scaling_efficiency"] == pytest.approx(float(shown["2"]), abs=2e-3)
    tuned = {key: two.data.params[f"resolved.{key}"] for key in ("cycle_time_ms", "fusion_threshold_mb")}
    assert tuned == {"cycle_time_ms": str(CPU_CYCLE_MS), "fusion_threshold_mb": "128"}
    artifacts = api_call(prefect_api, "/artifacts/filter", {})
    assert any(a["key"] == "scaling" and a["type"] == "table" for a in artifacts)


def test_the_ranks_started_ahead_of_the_training_step_train_the_run(pipeline_run: PipelineRun) -> None:
    """The job's ranks started at the run's start (loading TensorFlow while prepare and the checks ran) are the ones
    the training step launched: its one launch names them; their job files are gone after the run."""
    (launch,) = [line.split("launching: ", 1)[1] for line in pipeline_run.logged.splitlines() if "launching: " in line]
    assert re.search(r"-np 2 .* -m trainer --config \S+/outputs/\.ranks-ahead/job-\d+-\w+/trainer_config\.json "
                     r"--ahead-of \d+ --backend horovod$", launch), launch
    assert not list((pipeline_run.repo / "outputs" / ".ranks-ahead").iterdir())


def test_the_run_ends_with_where_the_time_went(pipeline_run: PipelineRun) -> None:
    """The last line: the run's wall time, its epochs, and each step's time outside them, the train step in parts."""
    last = pipeline_run.output.strip().splitlines()[-1]
    found = re.fullmatch(r"time: ([\d.]+) s, ([\d.]+) s of it epochs; outside them: (.*)", last)
    assert found and 0 < float(found[2]) < float(found[1]), last
    steps = [part.rsplit(" ", 1) for part in re.sub(r" \(.*?\)", "", found[3]).split(", ")]
    assert all(float(seconds) >= 0 for _, seconds in steps), last
    assert [name for name, _ in steps] == ["start and Prefect", "prepare", "preflight", "version", "changes",
                                           "open-run", "train", "evaluate", "export", "register", "publish"], last
    assert re.search(r"train [\d.]+ \(launch to first rank [\d.]+, to first epoch -?[\d.]+, after last epoch [\d.]+\)",
                     last), last


def test_the_run_prints_no_python_warning(pipeline_run: PipelineRun) -> None:
    """What the run prints is ringflow's and its steps' lines: no library's Python warning (`file.py:N: ...Warning:`)
    among them."""
    printed = pipeline_run.output + pipeline_run.logged
    assert not re.findall(r"^\S+\.py:\d+: \w*Warning: .*$", printed, re.M)
