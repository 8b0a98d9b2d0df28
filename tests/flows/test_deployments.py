"""prefect.yaml deployments run by `make serve` (a real Prefect server on a free 127.0.0.1 port and a real process
worker) in a private copy of the checkout: override, refusal, what a flow run may not choose, schedule, retrain skip
and force, artifacts. (A run cancelled while it trains on the test cluster: test_deployments_cluster.py.)

`make serve` starts once, for this module: every test that needs a deployment run is here, each telling its own MLflow
runs from the others' by their ids."""
from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pandas as pd
import pytest
import yaml

from tests import helpers
from tests.helpers import BIN, ROOT, copy_checkout, drawn_digit, free_port, quiet_env, run
from tests.scripts.services import read_client_env

if TYPE_CHECKING:
    from mlflow.entities import Run

pytestmark = pytest.mark.slow  # make serve: Prefect server and worker

POOL = "ringflow-local"
OVERRIDE = "learning_rate=0.002"
AUGMENT_OFF = 'overrides={"input.augment": "off"}'  # YAML 1.1 would read a bare off as false


CREDENTIALS: dict[str, str] = {}  # a make serve's Prefect API -> its `user:password` (authentication is on)


def api_call(api: str, path: str, body: Any = None, method: str | None = None) -> Any:
    """tests.helpers.api_call, with the credentials of the make serve whose API it is."""
    return helpers.api_call(api, path, body, auth=CREDENTIALS.get(api), method=method)


def serve_credentials(client_env: Path, serve: subprocess.Popen, timeout: float = 60) -> dict[str, str]:
    """What make serve's client.env exports (PREFECT_API_URL, PREFECT_API_AUTH_STRING), once it wrote it."""
    deadline = time.monotonic() + timeout
    while "PREFECT_API_AUTH_STRING" not in (client_env.read_text() if client_env.exists() else ""):
        assert serve.poll() is None and time.monotonic() < deadline, f"make serve exited with {serve.returncode}"
        time.sleep(0.5)
    return read_client_env(client_env)


@dataclass(frozen=True)
class Served:
    repo: Path
    api: str
    env: dict[str, str]
    model_port: int  # make serve's model server


def wait_for_worker(api: str, serve: subprocess.Popen, timeout: float = 240) -> None:
    """Until the work pool has an online worker and both deployments exist."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert serve.poll() is None, f"make serve exited with {serve.returncode}"
        try:
            workers = api_call(api, f"/work_pools/{POOL}/workers/filter", {})
            api_call(api, "/deployments/name/training-pipeline/retrain")
            if any(worker["status"] == "ONLINE" for worker in workers):
                return
        except OSError:
            pass
        time.sleep(1)
    raise TimeoutError("no online worker")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serving(tmp_path_factory, np=1)  # deployments are what these runs try: one rank trains as two would


def serving(tmp_path_factory: pytest.TempPathFactory, **train: int) -> Iterator[Served]:
    """`scripts/serve.sh` (what `make serve` runs) in a checkout whose params.yaml trains 2 epochs (and the other
    train settings given)."""
    repo = copy_checkout(tmp_path_factory.mktemp("served"))
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["train"].update(epochs=2, **train)
    # make serve's model server; every item the drift test sends is logged
    params["serving"].update(port=free_port(), poll_seconds=1, log_max_per_second=10_000)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-qam", "2 epochs"],
                   cwd=repo, check=True)
    port = free_port()
    # the worker asks for work every second, not every 10 s: each deployment run starts as soon as it is created
    env = quiet_env(PREFECT_PORT=str(port), PREFECT_HOME=str(repo / ".prefect"), PREFECT_WORKER_QUERY_SECONDS="1")
    env.pop("PREFECT_API_URL", None)
    log = open(repo.parent / "serve.log", "w")
    serve = subprocess.Popen(["bash", "scripts/serve.sh"], cwd=repo, env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    try:
        client = serve_credentials(repo / ".prefect" / "client.env", serve)
        CREDENTIALS[api] = client["PREFECT_API_AUTH_STRING"]
        wait_for_worker(api, serve)
        yield Served(repo, api, env | client, params["serving"]["port"])
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a worker that does not stop is still stopped
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(timeout=60)
        log.close()


def deployment_run(served: Served, name: str, *params: str,
                   flow: str = "training-pipeline") -> tuple[subprocess.CompletedProcess, str | None]:
    """`prefect deployment run <flow>/<name> --param ... --watch`; (result, flow run id)."""
    arguments = [item for param in params for item in ("--param", param)]
    done = run([str(BIN / "prefect"), "deployment", "run", f"{flow}/{name}", *arguments, "--watch"],
               served.repo, served.env, timeout=900)
    found = re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout)
    return done, found.group(1) if found else None


def cancel_flow_run(served: Served, flow_run_id: str) -> None:
    """`prefect flow-run cancel`, and a bounded wait for the run's CANCELLED state."""
    cancel = run([str(BIN / "prefect"), "flow-run", "cancel", flow_run_id], served.repo, served.env, timeout=120)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr

    def cancelled() -> bool:
        return api_call(served.api, f"/flow_runs/{flow_run_id}")["state"]["type"] == "CANCELLED"
    assert helpers.wait_until(cancelled, 120)


def flow_run_artifacts(served: Served, flow_run_id: str) -> dict[str, dict]:
    """The flow run's artifacts by key."""
    found = api_call(served.api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
    return {artifact["key"]: artifact for artifact in found}


def mlflow_runs(served: Served) -> list[Run]:
    """Training runs of the checkout's MLflow store, newest first (none before its first run made the store)."""
    from mlflow.tracking import MlflowClient
    store = served.repo / "mlruns" / "mlflow.db"
    if not store.exists():
        return []
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("ringflow")
    if experiment is None:
        return []
    return list(client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"]))


def run_ids(served: Served) -> set[str]:
    """The ids of the checkout's MLflow runs."""
    return {found.info.run_id for found in mlflow_runs(served)}


def runs_since(served: Served, before: set[str]) -> list[Run]:
    """The MLflow runs that are not among the ids `before` (made since), newest first."""
    return [found for found in mlflow_runs(served) if found.info.run_id not in before]


def training_run(served: Served, run_id: str) -> Run:
    """One MLflow run of the checkout's store, as it is now."""
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}").get_run(run_id)


@dataclass(frozen=True)
class Trained:
    flow_run_id: str
    run_id: str  # of the one MLflow run it made


@pytest.fixture(scope="module")
def trained(served: Served) -> Trained:
    """One `train` deployment run with a --param override: its flow run id and the one MLflow run it made."""
    before = run_ids(served)
    done, flow_run_id = deployment_run(served, "train", OVERRIDE, AUGMENT_OFF)
    assert done.returncode == 0 and "Completed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert flow_run_id
    (made,) = runs_since(served, before)
    return Trained(flow_run_id, made.info.run_id)


def test_every_entrypoint_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.flows import load_flow_from_entrypoint
    monkeypatch.chdir(ROOT)
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    assert {d["name"] for d in deployments} == {"train", "retrain", "monitor", "train-remote", "sweep"}
    for deployment in deployments:
        flow = "serving-monitor" if deployment["name"] == "monitor" else "training-pipeline"
        assert load_flow_from_entrypoint(deployment["entrypoint"]).name == flow


def test_retrain_and_monitor_schedules_are_registered(served: Served) -> None:
    retrain = api_call(served.api, "/deployments/name/training-pipeline/retrain")
    (schedule,) = retrain["schedules"]
    assert (schedule["schedule"]["cron"], schedule["schedule"]["timezone"], schedule["active"]) == \
        ("0 3 * * 1", "UTC", True)
    assert retrain["parameters"] == {"skip_unchanged": True} and retrain["enforce_parameter_schema"]
    assert retrain["work_pool_name"] == POOL
    assert api_call(served.api, "/deployments/name/training-pipeline/train")["schedules"] == []
    (hourly,) = api_call(served.api, "/deployments/name/serving-monitor/monitor")["schedules"]
    assert (hourly["schedule"]["cron"], hourly["active"]) == ("5 * * * *", True)


def test_the_scheduler_makes_the_retrain_runs(served: Served) -> None:
    """Prefect's scheduler service inserts the next Mondays' runs (it could not with SQLAlchemy 2.1)."""
    retrain = api_call(served.api, "/deployments/name/training-pipeline/retrain")
    query = {"deployments": {"id": {"any_": [retrain["id"]]}},
             "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}}
    deadline, scheduled = time.monotonic() + 120, []
    while not scheduled and time.monotonic() < deadline:
        scheduled = api_call(served.api, "/flow_runs/filter", query)
        time.sleep(1)
    starts = {run["expected_start_time"] for run in scheduled}
    assert starts and all(time.strptime(start[:10], "%Y-%m-%d").tm_wday == 0 for start in starts), starts
    assert all(start[11:19] == "03:00:00" for start in starts), starts


@pytest.mark.parametrize("param, field", [("epochs=0", "epochs"), ("backend=tpu", "backend")])
def test_a_bad_param_is_refused_before_any_run(served: Served, param: str, field: str) -> None:
    before = train_flow_runs(served)
    done, _ = deployment_run(served, "train", param)
    assert done.returncode != 0
    assert f"Validation failed for field '{field}'" in done.stdout + done.stderr
    assert train_flow_runs(served) == before


def test_train_run_carries_the_override(served: Served, trained: Trained) -> None:
    mlflow_run = training_run(served, trained.run_id)
    assert mlflow_run.info.status == "FINISHED"
    assert (mlflow_run.data.params["train.learning_rate"], mlflow_run.data.params["train.epochs"]) == \
        ("0.002", "2")
    assert mlflow_run.data.params["input.augment"] == "off"
    assert mlflow_run.data.metrics["test_accuracy"] > 0.5  # it trained (2 epochs: 0.80 to 0.89 seen; chance 0.1)
    source = (mlflow_run.data.tags["mlflow.source.name"], mlflow_run.data.tags["mlflow.source.type"])
    assert source == ("training-pipeline/train", "JOB")  # the deployment that started it


def test_evaluation_report_and_registered_model(served: Served, trained: Trained) -> None:
    import mlflow.pyfunc
    from mlflow.tracking import MlflowClient
    mlflow_run = training_run(served, trained.run_id)
    uri = f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    files = {a.path for a in client.list_artifacts(mlflow_run.info.run_id, "evaluation")}
    assert files == {f"evaluation/{name}" for name in ("per_class.json", "confusion_matrix.json",
                                                        "confusion_matrix.png", "training_curves.png",
                                                        "reference.json")}  # what the monitor compares with
    metrics = mlflow_run.data.metrics
    assert all(0 <= metrics[f"test_{kind}_{digit}"] <= 1 for kind in ("precision", "recall") for digit in range(10))
    assert "test_top5_accuracy" not in metrics  # 10 classes
    champion = client.get_model_version_by_alias("ringflow", "champion")
    assert champion.run_id == mlflow_run.info.run_id and mlflow_run.data.tags["ringflow.gate.decision"] == "champion"
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model("models:/ringflow@champion")
    answer = model.predict(model.input_example)  # two test images as PNG bytes, as a client sends them
    assert len(answer) == 2 and set(answer["error"]) == {""} and set(answer["class"]) <= set("0123456789")
    assert len(model.predict(pd.DataFrame({"pixels": list(np.zeros((3, 64), np.float32))}))) == 3  # 8x8x1, flat


def wait_for_the_champion(served: Served) -> str:
    """Until make serve's model server serves the registry's champion; its model's address."""
    from mlflow.tracking import MlflowClient
    champion = MlflowClient(tracking_uri=f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}") \
        .get_model_version_by_alias("ringflow", "champion")
    model_server = f"http://127.0.0.1:{served.model_port}/v1/models/ringflow"
    deadline, served_version = time.monotonic() + 120, None  # it loads the first champion it sees: seconds
    while served_version != str(champion.version):
        assert time.monotonic() < deadline, served_version
        time.sleep(0.5)
        try:
            served_version = api_call(model_server, "")["model_version_status"][0]["version"]
        except OSError:  # not listening yet
            continue
    return model_server


def test_make_serve_serves_the_champion_a_deployment_run_promotes(served: Served, trained: Trained) -> None:
    """make serve's model server started before any model was registered; it serves what the run promoted."""
    model_server = wait_for_the_champion(served)
    drawn = base64.b64encode(drawn_digit(4)).decode()
    answer = api_call(f"{model_server}:predict", "", {"instances": [{"b64": drawn}]})["predictions"][0]
    assert answer["classes"] in [str(digit) for digit in range(10)] and answer["errors"] == ""


def test_prefect_artifacts_summarize_the_run(served: Served, trained: Trained) -> None:
    artifacts = flow_run_artifacts(served, trained.flow_run_id)
    mlflow_run = training_run(served, trained.run_id)
    summary = artifacts["run-summary"]["data"]
    assert mlflow_run.info.run_id in summary and "#/experiments/" in summary
    assert "champion" in summary and mlflow_run.data.params["data_hash"] in summary
    epochs = artifacts["epoch-metrics"]["data"]
    rows = yaml.safe_load(epochs) if isinstance(epochs, str) else epochs
    assert [row["epoch"] for row in rows] == [1, 2] and all("val_accuracy" in row for row in rows)
    assert "data-validation" in artifacts


def test_a_deployment_run_may_not_pass_a_command_through(served: Served, trained: Trained) -> None:
    """A pass-through parameter (it reaches horovodrun's or mpirun's command line) in a deployment run's overrides is
    refused in one line naming the key, before any MLflow run: the deployment does not say allow_passthrough."""
    runs_before = run_ids(served)
    done, flow_run_id = deployment_run(served, "train", 'overrides={"train.horovodrun_args": ["--verbose"]}')
    assert done.returncode != 0 and flow_run_id
    state = api_call(served.api, f"/flow_runs/{flow_run_id}")["state"]
    assert state["type"] == "FAILED"
    assert "train.horovodrun_args: not taken from a deployment run's overrides" in state["message"]
    logs = api_call(served.api, "/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run_id]}}})
    assert any("train.horovodrun_args: not taken from a deployment run's overrides" in log["message"] for log in logs)
    assert run_ids(served) == runs_before


@pytest.mark.parametrize("variable", ['command="touch {proof}"', 'env={{"BASH_ENV": "{proof}"}}',
                                      'working_dir="{proof}"'], ids=["command", "env", "working_dir"])
def test_a_deployment_run_may_not_choose_what_the_worker_runs(served: Served, tmp_path: Path, variable: str) -> None:
    """`--job-variable command=...` (or env, working_dir): Prefect's server refuses the flow run against the pool's
    base job template (servers/work_pools.py) before it exists, and says which variable; the worker runs nothing."""
    proof = tmp_path / "proof"
    flow_runs_before = train_flow_runs(served)
    done = run([str(BIN / "prefect"), "deployment", "run", "training-pipeline/train", "--job-variable",
                variable.format(proof=proof), "--watch"], served.repo, served.env, timeout=120)
    said = " ".join((done.stdout + done.stderr).split())  # Prefect's console wraps its lines
    assert done.returncode != 0 and "Additional properties are not allowed" in said, said[-3000:]
    assert variable.split("=")[0] in said
    time.sleep(2)  # what a worker would have started by now (it polls every second)
    assert not proof.exists() and train_flow_runs(served) == flow_runs_before


def train_flow_runs(served: Served) -> int:
    """How many flow runs the train deployment has (Prefect's scheduler adds the scheduled deployments' own at times
    of its choosing: the hourly monitor's appeared during the test once)."""
    return len(api_call(served.api, "/flow_runs/filter", {"deployments": {"name": {"any_": ["train"]}}}))


def trained_epochs(served: Served, run_id: str) -> list[int]:
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}")
    return sorted({metric.step for metric in client.get_metric_history(run_id, "loss")})


def commit(served: Served, path: str, text: str) -> None:
    """Append text to a file of the served checkout and commit it."""
    with open(served.repo / path, "a") as handle:
        handle.write(text)
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-qam", f"edit {path}"],
                   cwd=served.repo, check=True)


def retrain(served: Served, *params: str) -> tuple[bool, str]:
    """A `retrain` deployment run: (whether it skipped training, its run summary)."""
    done, flow_run_id = deployment_run(served, "retrain", OVERRIDE, AUGMENT_OFF, *params)
    assert done.returncode == 0, done.stdout[-3000:]
    text = flow_run_artifacts(served, flow_run_id)["run-summary"]["data"]
    return "Training skipped" in text, text


def test_retrain_skips_after_a_readme_commit_and_trains_when_forced(served: Served, trained: Trained) -> None:
    """The retrain deployment after the train run: a commit of the README changes nothing that trains (skipped,
    without reading the data's validation again); force=true trains all the same. (A commit to the code that trains
    is a change: tests/examples/test_field_regressor_pipeline.py.)"""
    runs_before, stamp = run_ids(served), served.repo / "outputs" / "validated.json"
    validated_at = stamp.stat().st_mtime_ns
    commit(served, "README.md", "\nA line about nothing that trains.\n")
    assert retrain(served)[0]
    assert run_ids(served) == runs_before
    assert stamp.stat().st_mtime_ns == validated_at  # the data's validation was not read again
    forced, text = retrain(served, "force=true")
    assert not forced and "Gate:" in text
    (newest,) = runs_since(served, runs_before)  # a new run
    assert newest.info.status == "FINISHED"
    assert trained_epochs(served, newest.info.run_id) == [0, 1]  # it trained every epoch, from scratch
    assert newest.data.tags["ringflow.gate.decision"] in ("champion", "challenger")


def test_a_sweep_through_its_deployment_goes_on_past_a_trial_refused_for_bad_input(served: Served) -> None:
    """`prefect deployment run training-pipeline/sweep`, a grid over a batch size too large for the data: that trial
    is refused before its launch and recorded as a FAILED child run saying why; the other trains and is registered;
    the flow run completes, and the sweep's run and its trials say the deployment started them."""
    overrides = {"sweep.method": "grid", "sweep.parallel": 2, "train.np": 1, "train.epochs": 2,
                 "sweep.space": {"train.batch_size": [32, 4096]}}
    runs_before = run_ids(served)
    done, flow_run_id = deployment_run(served, "sweep", f"overrides={json.dumps(overrides)}")
    assert done.returncode == 0 and "Completed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert flow_run_id and "sweep-trials" in flow_run_artifacts(served, flow_run_id)
    runs = [found for found in runs_since(served, runs_before) if found.data.tags.get("ringflow.kind") == "sweep"
            or "ringflow.sweep.trial" in found.data.tags]
    assert {found.data.tags["mlflow.source.name"] for found in runs} == {"training-pipeline/sweep"}
    trials = {found.data.params["train.batch_size"]: found for found in runs
              if "ringflow.sweep.trial" in found.data.tags}
    assert len(runs) == 3 and trials["32"].info.status == "FINISHED"
    refused = trials["4096"]
    assert refused.info.status == "FAILED" and refused.data.tags["ringflow.sweep.trial_state"] == "failed"
    assert "exceeds the 1257 training records" in refused.data.tags["ringflow.sweep.said"]


def served_stream(served: Served, images: np.ndarray) -> None:
    """The images as PNG to make serve's model server, 16 a request, as a client sends them."""
    from PIL import Image
    model_server = f"http://127.0.0.1:{served.model_port}/v1/models/ringflow:predict"
    encoded = []
    for image in images:
        out = io.BytesIO()
        Image.fromarray(image.astype(np.uint8)).save(out, "PNG")
        encoded.append(base64.b64encode(out.getvalue()).decode())
    for start in range(0, len(encoded), 16):
        answer = api_call(model_server, "", {"instances": [{"b64": item} for item in encoded[start:start + 16]]})
        assert all(item["errors"] == "" for item in answer["predictions"])


def shifted(images: np.ndarray) -> np.ndarray:
    """The images inverted, rotated or noisy, in turn (a world that moved away from the training data)."""
    noise = np.random.default_rng(0).normal(0, 80, images.shape[1:])
    moved = [255 - image if index % 3 == 0 else np.rot90(image) if index % 3 == 1 else image + noise
             for index, image in enumerate(images)]
    return np.clip(moved, 0, 255)


def logged_items(served: Served) -> int:
    import pyarrow.parquet as pq
    return sum(pq.read_metadata(part).num_rows for part in (served.repo / "outputs" / "predictions").rglob("*.parquet"))


def drift_runs(served: Served) -> list[dict]:
    """The flow runs a drift started (tagged `drift`)."""
    return api_call(served.api, "/flow_runs/filter", {"flow_runs": {"tags": {"all_": ["drift"]}}})


def monitor(served: Served, window: tuple[datetime, datetime]) -> subprocess.CompletedProcess:
    """`python -m flows.monitor` over the window, on make serve's Prefect server."""
    minutes = (window[1] - window[0]).total_seconds() / 60
    return run([str(BIN / "python"), "-m", "flows.monitor", "--set", f"monitor.window_minutes={minutes}", "--end",
                window[1].isoformat()], served.repo, served.env, timeout=300)


def test_a_shifted_stream_is_drift_that_starts_one_retraining_an_unshifted_one_is_not(served: Served,
                                                                                      trained: Trained) -> None:
    """make serve's model server answers the test split's images, then the same images inverted, rotated or noisy;
    the monitor over the first window finds no drift and starts nothing; the monitor deployment over the second
    finds drift, logs Evidently's report under the served version and starts the retrain deployment, whose run the
    worker starts; the monitor over that window again starts no second one."""
    with monitor_schedule_paused(served):
        drift_starts_one_retraining(served)


@contextmanager
def monitor_schedule_paused(served: Served) -> Iterator[None]:
    """The monitor deployment's hourly schedule paused (Prefect deletes the runs it scheduled): a scheduled monitor
    run over the last hour would see the test's shifted stream too, and start a retraining of its own."""
    monitor_deployment = api_call(served.api, "/deployments/name/serving-monitor/monitor")
    (schedule,) = monitor_deployment["schedules"]
    path = f"/deployments/{monitor_deployment['id']}/schedules/{schedule['id']}"
    api_call(served.api, path, {"active": False}, method="PATCH")
    assert not api_call(served.api, "/flow_runs/filter", {
        "deployments": {"id": {"any_": [monitor_deployment["id"]]}},
        "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}},
                      "expected_start_time": {"after_": datetime.now(timezone.utc).isoformat()}}})
    try:
        yield
    finally:
        api_call(served.api, path, {"active": True}, method="PATCH")


def drift_starts_one_retraining(served: Served) -> None:
    from mlflow.tracking import MlflowClient
    images = helpers.read_split(served.repo / "data" / "prepared", "test")[0][..., 0]
    wait_for_the_champion(served)
    logged = logged_items(served)
    times = [datetime.now(timezone.utc)]
    served_stream(served, images)
    times.append(datetime.now(timezone.utc))
    served_stream(served, shifted(images))
    times.append(datetime.now(timezone.utc))
    assert helpers.wait_until(lambda: logged_items(served) >= logged + 2 * len(images), 60)
    done = monitor(served, (times[0], times[1]))
    assert done.returncode == 0 and f"{len(images)} item(s) answered" in done.stdout + done.stderr, done.stderr[-2000:]
    assert "monitor:        no drift" in done.stdout and not drift_runs(served)
    minutes = (times[2] - times[1]).total_seconds() / 60
    done, flow_run_id = deployment_run(served, "monitor", f"window_minutes={minutes}", f"end={times[2].isoformat()}",
                                       flow="serving-monitor")
    assert done.returncode == 0 and "Completed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    (started,) = drift_runs(served)
    again = monitor(served, (times[1], times[2]))
    assert "was started for this window already" in again.stdout + again.stderr and len(drift_runs(served)) == 1
    client = MlflowClient(tracking_uri=f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}")
    champion = client.get_model_version_by_alias("ringflow", "champion")
    report_run = client.get_run(champion.tags["ringflow.drift.run_id"])
    assert report_run.data.tags["ringflow.drift"] == "true" and champion.tags["ringflow.drift.detected"] == "true"
    assert {item.path for item in client.list_artifacts(report_run.info.run_id, "drift")} >= \
        {"drift/report.html", "drift/features.png", "drift/answers.png"}
    assert started["deployment_id"] == api_call(served.api, "/deployments/name/training-pipeline/retrain")["id"]
    state = f"/flow_runs/{started['id']}"
    assert helpers.wait_until(lambda: api_call(served.api, state)["state_type"] != "SCHEDULED", 120)  # it started
    # a whole retraining is what the retrain tests above run: this one is cancelled (unless it skipped, and ended)
    run([str(BIN / "prefect"), "flow-run", "cancel", started["id"]], served.repo, served.env, timeout=120)
    assert helpers.wait_until(lambda: api_call(served.api, state)["state_type"] in ("COMPLETED", "CANCELLED"), 120)
