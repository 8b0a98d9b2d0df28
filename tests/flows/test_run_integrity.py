"""Every run trains what it says, on its own: successive and concurrent runs, a retry after a killed rank,
an out-of-memory kill (one line, no retry), and dvc.lock left alone when params are overridden.

Real components throughout: the pipeline CLI against a real Prefect server, Horovod, MLflow and DVC, in a private
copy of the checkout."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from tasks.errors import INTERRUPTED
from tests.helpers import PYTHON, WATCHING_IMPORTS, make_workspace, memory_limited, run, workspace_env
from trainer.protocol import weights_digests
from trainer.slurm_cluster import rank_from_environment

pytestmark = pytest.mark.slow  # whole pipelines: Prefect server, Horovod, MLflow, DVC

RUN_ID = re.compile(r"^mlflow run id:\s+(\w+)$", re.M)


def mlflow_client(repo: Path):
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}")


def pipeline(*overrides: str) -> list[str]:
    """The pipeline CLI's command line with --set overrides."""
    return [PYTHON, "-m", "flows.pipeline", *[item for o in overrides for item in ("--set", o)]]


def training_runs(repo: Path, filter_string: str = "") -> list:
    """Runs of the checkout's `ringflow` experiment, newest first."""
    client = mlflow_client(repo)
    experiment = client.get_experiment_by_name("ringflow") if (repo / "mlruns" / "mlflow.db").exists() else None
    if experiment is None:
        return []
    return list(client.search_runs([experiment.experiment_id], filter_string,
                                   order_by=["attributes.start_time DESC"]))


def trained_epochs(repo: Path, run_id: str) -> list[int]:
    """The epochs a run logged a training loss for (MLflow metric history steps)."""
    return sorted({m.step for m in mlflow_client(repo).get_metric_history(run_id, "loss")})


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("integrity"))


def rank0_digest(output: str) -> str:
    return re.search(r"weights_sha256 rank=0 ([0-9a-f]{64})", output)[1]


def logged_model_agrees(repo: Path, run_id: str, digest: str) -> None:
    """The run's logged Keras model has the weights rank 0 printed, and the model version registered from that run
    predicts exactly what that Keras model predicts."""
    import mlflow.pyfunc

    from tests.helpers import read_split
    from trainer.model_io import load_model
    from trainer.session import weights_digest
    client = mlflow_client(repo)
    model_dir = Path(client.download_artifacts(run_id, "model"))
    keras_model = load_model(model_dir)
    assert weights_digest(keras_model) == digest
    (version,) = client.search_model_versions(f"run_id = '{run_id}'")
    mlflow.set_tracking_uri(f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}")
    registered = mlflow.pyfunc.load_model(f"models:/{version.name}/{version.version}")
    images, _ = read_split(repo / "data" / "prepared", "test")
    answer = registered.predict(pd.DataFrame({"pixels": list(images.reshape(len(images), -1))}))
    probabilities = [[row[name] for name in sorted(row, key=int)] for row in answer["probabilities"]]  # digits' names
    np.testing.assert_allclose(probabilities, keras_model.predict(images, verbose=0), atol=1e-5)


def test_two_runs_at_once_then_one_after_each_train_every_epoch_and_register_their_own_model(
        repo: Path, prefect_api: str) -> None:
    """Two pipelines at once each register the model their rank 0 trained; the run after them trains every epoch
    again (no checkpoint of theirs resumed) and, with the data validated already, never imports TensorFlow in the
    pipeline's process: the training's lead wrote the test predictions and the SavedModel, export's fresh process
    checked the reload and scored the champion."""
    env = workspace_env(repo, PREFECT_API_URL=prefect_api)
    jobs = [subprocess.Popen(pipeline("epochs=2", "np=1", f"learning_rate={rate}"), cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rate in (0.001, 0.003)]
    outputs = [job.communicate(timeout=900)[0] for job in jobs]
    run_ids = []
    for job, output in zip(jobs, outputs):
        assert job.returncode == 0, output[-3000:]
        run_ids.append(RUN_ID.search(output)[1])
        logged_model_agrees(repo, run_ids[-1], rank0_digest(output))
    mark = repo.parent / "imported-tensorflow"
    done = run([PYTHON, "-c", WATCHING_IMPORTS, "--set", "epochs=2", "--set", "np=1"], repo,
               dict(env, RINGFLOW_TEST_IMPORT_MARK=str(mark)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming from checkpoint" not in done.stdout + done.stderr and not mark.exists()
    assert re.search(r"v\d+ (promoted to champion|kept as challenger): .* on the same test split", done.stdout)
    run_ids.append(RUN_ID.search(done.stdout)[1])
    assert len(set(run_ids)) == 3
    for run_id in run_ids:
        assert trained_epochs(repo, run_id) == [0, 1]
        mlflow_run = mlflow_client(repo).get_run(run_id)
        assert mlflow_run.info.status == "FINISHED"
        record = mlflow_run.data.tags["ringflow.dvc_record"]
        assert record.startswith("dvc.lock left alone: ") and "train.epochs" in record, record
    assert record == "dvc.lock left alone: train.np, train.epochs differ from params.yaml"  # the last run's
    published = json.loads((repo / "outputs" / "published.json").read_text())
    assert {item["run_id"] for item in published.values()} == {run_ids[2]}
    assert json.loads((repo / "outputs" / "model" / "run.json").read_text())["run_id"] == run_ids[2]
    assert "outs" not in json.dumps(__import__("yaml").safe_load((repo / "dvc.lock").read_text())["stages"].get(
        "train", {}))  # never recorded: its params were not params.yaml's


def kill_a_rank_after_epoch(repo: Path, run_id_holder: list[str], job: subprocess.Popen, epoch: int) -> None:
    """SIGKILL rank 1 of the job's training once MLflow has the given epoch of the newest run."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and job.poll() is None:
        runs = training_runs(repo, "attributes.status = 'RUNNING'")
        if runs and len(trained_epochs(repo, runs[0].info.run_id)) >= epoch:
            run_id_holder.append(runs[0].info.run_id)
            for process in psutil.process_iter(["cmdline", "environ"]):
                cmdline = " ".join(process.info["cmdline"] or [])
                env = process.info["environ"] or {}
                if "-m trainer --config" in cmdline and str(repo) in cmdline and \
                        rank_from_environment(env) == "1":
                    process.send_signal(signal.SIGKILL)
                    return
        time.sleep(0.5)
    raise AssertionError("the training never reached the epoch to kill a rank at")


def test_a_killed_rank_then_one_lost_after_the_last_checkpoint_are_each_resumed_by_a_retry(
        repo: Path, prefect_api: str) -> None:
    """Rank 1 killed after epoch 2: the flow's retry continues that run from its checkpoint; then a rank killed
    between the last epoch's checkpoint and the model's save (the trainer's test-only hook): the next retry restores
    the checkpoint of every epoch in the ranks, trains none and saves the model, and the run goes on to its
    evaluation, export, registration and publishing."""
    env = workspace_env(repo, PREFECT_API_URL=prefect_api, RINGFLOW_TEST_FAIL_BEFORE_SAVE=str(repo.parent / "lost-1"))
    job = subprocess.Popen(pipeline("epochs=5", "pipeline.train_retries=2", "pipeline.retry_delay_seconds=0"),
                           cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed_run: list[str] = []
    kill_a_rank_after_epoch(repo, killed_run, job, epoch=2)
    output = job.communicate(timeout=900)[0]
    assert job.returncode == 0, output[-3000:]
    assert RUN_ID.search(output)[1] == killed_run[0]  # the same run, continued
    assert "rank 1 on localhost was killed by signal SIGKILL" in output, output[-3000:]
    resumed = [int(epoch) for epoch in re.findall(r"resuming from checkpoint at epoch (\d)", output)]
    assert resumed[0] >= 2 and resumed[-1] == 5, resumed  # each retry resumed: two failures
    assert "the checkpoints hold all 5 epochs" in output
    last_attempt = dict(weights_digests(output)[-2:])  # the attempt that finished: its two ranks, last
    assert len(last_attempt) == 2 and len(set(last_attempt.values())) == 1, output[-3000:]  # both restored alike
    client = mlflow_client(repo)
    summary = json.loads(Path(client.download_artifacts(killed_run[0], "model/train_summary.json")).read_text())
    assert summary["resumed_from_epoch"] == 5 and summary["history"] == {}  # the last attempt trained no epoch
    assert trained_epochs(repo, killed_run[0]) == [0, 1, 2, 3, 4]
    finished = client.get_run(killed_run[0])
    assert finished.info.status == "FINISHED" and "test_accuracy" in finished.data.metrics
    assert "images_per_sec_steady" not in finished.data.metrics  # no epoch ran in the attempt that finished it
    assert [item.path for item in client.list_artifacts(killed_run[0], "savedmodel")]
    assert client.search_model_versions(f"run_id = '{killed_run[0]}'")
    logged_model_agrees(repo, killed_run[0], rank0_digest(output))


def test_out_of_memory_ends_in_one_line_without_a_retry(repo: Path, prefect_api: str) -> None:
    env = workspace_env(repo, PREFECT_API_URL=prefect_api)
    before = len(training_runs(repo))
    command = pipeline("np=1", "image_size=224", "batch_size=512", "epochs=1")
    done = memory_limited(command, 3 << 30, repo, env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.match(r"^error: rank 0 on localhost was killed by the out-of-memory killer \(exit 137, SIGKILL\)",
                    lines[-1]), lines[-3:]
    runs = training_runs(repo)
    assert len(runs) == before + 1 and runs[0].info.status == "FAILED"  # one run, failed
    assert "Retry 1/" not in done.stdout + done.stderr  # and the training was not tried again


@pytest.mark.parametrize(("override", "message"), [
    ("model=resnet50", "error: model resnet50 needs inputs of at least 32x32; the data is 8x8 (set input.image_size)"),
    ("batch_size=1000000", "error: the global batch (train.batch_size 1000000 x 2 replicas = 2000000) exceeds the "
                           "1257 training records: lower train.batch_size or train.np"),
])
def test_bad_input_found_in_the_data_ends_in_one_line_before_any_run(repo: Path, prefect_api: str, override: str,
                                                                     message: str) -> None:
    before = len(training_runs(repo))
    done = run(pipeline(override), repo, workspace_env(repo, PREFECT_API_URL=prefect_api))
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, message)
    assert len(training_runs(repo)) == before  # no MLflow run was opened


def test_resume_refuses_a_finished_run_and_needs_an_interrupted_one(repo: Path, prefect_api: str) -> None:
    env = workspace_env(repo, PREFECT_API_URL=prefect_api)
    if not training_runs(repo, "attributes.status = 'FINISHED'"):  # run alone: make one
        assert run(pipeline("epochs=1"), repo, env).returncode == 0
    finished = training_runs(repo, "attributes.status = 'FINISHED'")[0].info.run_id
    done = run(pipeline("epochs=2", f"train.resume_from={finished}"), repo, env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == \
        (2, f"error: train.resume_from: run {finished} has finished; start a new run instead")
    done = run([*pipeline("epochs=2"), "--resume"], repo, env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == \
        (2, "error: --resume: no interrupted run with a checkpoint in experiment ringflow")


def test_an_interrupted_run_is_continued_with_resume_and_a_restore_meanwhile_waits_for_its_registration(
        repo: Path, prefect_api: str) -> None:
    """A pipeline killed hard after epoch 2 is continued by `--resume` to its last epoch, each epoch logged once;
    `python -m tasks restore` started while the resumed run trains says which run it waits for, and changes the
    data only after that run has registered its model (evaluation and the gate read the same data as training)."""
    env = workspace_env(repo, PREFECT_API_URL=prefect_api)
    interrupted = killed_after_epoch_2(repo, env, "epochs=20")  # epochs enough to still train when restore starts
    job = subprocess.Popen([*pipeline("epochs=20"), "--resume"], cwd=repo, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 600
    while not any(re.search(r"epoch \d+: ", line) for line in list(lines)):  # the resumed run trains
        assert time.monotonic() < deadline and job.poll() is None, "".join(lines)[-3000:]
        time.sleep(0.5)
    data_hash = mlflow_client(repo).get_run(interrupted).data.params["data_hash"]
    restored = run([PYTHON, "-m", "tasks", "restore", "--data-hash", data_hash], repo, env)
    registered_before_the_restore = any("Task run 'register" in line and "Finished in state Completed" in line
                                        for line in list(lines))
    job.wait(timeout=900)
    reader.join(timeout=60)
    output = "".join(lines)
    assert job.returncode == 0, output[-3000:]
    assert RUN_ID.search(output)[1] == interrupted  # type: ignore[index]
    assert int(re.search(r"resuming from checkpoint at epoch (\d+)", output)[1]) >= 2  # type: ignore[index]
    assert trained_epochs(repo, interrupted) == list(range(20))
    assert mlflow_client(repo).get_run(interrupted).info.status == "FINISHED"
    assert restored.returncode == 0, restored.stdout[-2000:] + restored.stderr[-2000:]
    assert re.search(rf"^restore of data version {data_hash}: waiting for the prepared data, in use by MLflow run "
                     rf"{interrupted} \(pid \d+\)$", restored.stdout, re.M), restored.stdout[-2000:]
    assert registered_before_the_restore


def killed_after_epoch_2(repo: Path, env: dict[str, str], *overrides: str) -> str:
    """A pipeline killed with its ranks (SIGKILL to its process group, as a crash or a hard stop) once MLflow has
    its run's epoch 2: that run's id."""
    job = subprocess.Popen(pipeline(*overrides), cwd=repo, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while not (running := training_runs(repo, "attributes.status = 'RUNNING'")) or \
            len(trained_epochs(repo, running[0].info.run_id)) < 2:
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.5)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    # Horovod's own watch ends the orphaned ranks within seconds; they may finish an epoch or two before that
    return str(running[0].info.run_id)


def interrupted_at(repo: Path, delay: float) -> tuple[subprocess.Popen, str]:
    """A pipeline started with SIGINT ignored (as a shell starts a background job, as CI may run the suite), sent
    Ctrl-C (SIGINT to its process group) `delay` seconds after its training launched; (it, its stderr)."""
    job = subprocess.Popen(pipeline("epochs=200"), cwd=repo, env=workspace_env(repo), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert job.stderr is not None
    said = []
    for line in job.stderr:
        said.append(line)
        if "launching: " in line:
            break
    time.sleep(delay)
    os.killpg(job.pid, signal.SIGINT)
    rest = job.communicate(timeout=120)[1]
    return job, "".join(said) + rest


def ranks_of(repo: Path) -> list[str]:
    """The command lines of the training processes of the checkout's runs."""
    listed = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
    return [line for line in listed.splitlines() if str(repo) in line and "-m trainer" in line]


def test_ctrl_c_while_the_ranks_wait_ahead_of_the_training_step_stops_them_in_one_line(repo: Path) -> None:
    """Ctrl-C before the training step, while its ranks, started ahead, load TensorFlow or wait for their job: one
    line, last, exit 130; no rank left, nor their job files."""
    job = subprocess.Popen(pipeline("epochs=200"), cwd=repo, env=workspace_env(repo), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not [line for line in ranks_of(repo) if "--ahead-of" in line] and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(job.pid, signal.SIGINT)
    err = job.communicate(timeout=120)[1]
    assert job.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == f"error: {INTERRUPTED}"
    assert "launching: " not in err  # interrupted before the training step
    assert not ranks_of(repo) and not list((repo / "outputs" / ".ranks-ahead").iterdir())


@pytest.mark.parametrize("delay", [0.0, 1.4, 2.8, 5.6, 9.0])
def test_ctrl_c_at_any_moment_of_training_ends_the_run_in_one_line_and_leaves_no_rank(repo: Path,
                                                                                      delay: float) -> None:
    """Ctrl-C in the terminal of `make run`, at moments from the launch through the ranks' start to the epochs: one
    line, last, exit 130, whatever the launcher made of the interrupt; the MLflow run is marked FAILED, not retried,
    and no rank is left."""
    job, err = interrupted_at(repo, delay)
    assert job.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == f"error: {INTERRUPTED}"
    launches = {line for line in err.splitlines() if "launching: " in line}  # Prefect may print a record twice
    assert len(launches) == 1 and "Retry " not in err, err[-3000:]  # not retried
    assert training_runs(repo)[0].info.status == "FAILED"
    assert not ranks_of(repo)
