"""What a job's processes inherit: an allow-list of this environment, never a secret and no tracking setting (rank 0
prints its metrics for the launcher); printed commands with their credentials hidden."""
from __future__ import annotations

import json
import os

import pytest

from tasks.launch.environment import forwarded, rank_environment
from tasks.paths import ROOT
from tasks.redaction import is_secret, redact
from trainer.protocol import METRICS_SPOOL_ENV

PASSWORD_URI = "http://ringflow:hunter2@tracking.example:5000"


def test_each_process_finds_this_checkout_first_on_its_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/site/extra")
    assert rank_environment()["PYTHONPATH"] == f"{ROOT}{os.pathsep}/site/extra"
    monkeypatch.delenv("PYTHONPATH")
    assert rank_environment()["PYTHONPATH"] == str(ROOT)


def test_the_processes_are_quiet_and_unbuffered() -> None:
    env = rank_environment()
    assert (env["TF_CPP_MIN_LOG_LEVEL"], env["PYTHONUNBUFFERED"]) == ("2", "1")


def test_only_the_allow_listed_variables_reach_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = {"HOROVOD_FUSION_THRESHOLD": "0", "NCCL_DEBUG": "INFO", "OMPI_MCA_btl": "self,tcp", "HOME": "/home/u",
            "CUDA_VISIBLE_DEVICES": "0,1", "LC_ALL": "C.UTF-8", "TF_USE_LEGACY_KERAS": "1"}
    dropped = {"RINGFLOW_TEST_MARK": "x", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_ACCESS_KEY_ID": "AKIA",
               "GITHUB_TOKEN": "ghp", "DATABASE_URL": "postgresql://u:p@db/x", "MLFLOW_TRACKING_PASSWORD": "pw",
               "MLFLOW_TRACKING_URI": PASSWORD_URI, "TF_SERVING_PASSWORD": "pw", "HOROVOD_SECRET_KEY": "k"}
    for name, value in (kept | dropped).items():
        monkeypatch.setenv(name, value)
    env = rank_environment()
    assert {name: env.get(name) for name in kept} == kept
    assert not set(dropped) & set(env)
    assert "hunter2" not in json.dumps(env) and "s3cr3t" not in json.dumps(env)


@pytest.mark.parametrize(("name", "value", "secret"), [
    ("AWS_SECRET_ACCESS_KEY", "", True), ("MLFLOW_TRACKING_TOKEN", "", True), ("PGPASSWORD", "", True),
    ("SSH_AUTH_SOCK", "/tmp/agent", False), ("API_KEY", "", True), ("KEYBOARD", "", False),
    ("TRACKING", PASSWORD_URI, True), ("TRACKING", "http://tracking.example:5000", False),
])
def test_a_secret_is_known_by_its_name_or_a_password_in_a_url(name: str, value: str, secret: bool) -> None:
    assert is_secret(name, value) is secret


def test_the_forwarded_part_never_holds_a_url_with_a_password() -> None:
    assert forwarded({"TF_CONFIG": '{"x": "grpc://a:b@h:1"}', "TF_CPP_MIN_LOG_LEVEL": "2"}) == \
        {"TF_CPP_MIN_LOG_LEVEL": "2"}


def test_no_tracking_setting_reaches_a_rank_and_rank_0_spools_only_beside_this_filesystem(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"MLFLOW_RUN_ID": "inherited", "MLFLOW_TRACKING_URI": "http://tracking.example:5000",
                        "MLFLOW_EXPERIMENT_NAME": "x", METRICS_SPOOL_ENV: "1"}.items():
        monkeypatch.setenv(name, value)
    shared, unshared = rank_environment(spool_metrics=True), rank_environment()
    assert not [name for name in (*shared, *unshared) if name.startswith("MLFLOW_")]
    assert shared[METRICS_SPOOL_ENV] == "1" and METRICS_SPOOL_ENV not in unshared
    assert os.environ["MLFLOW_RUN_ID"] == "inherited"  # this process's own environment is left alone


@pytest.mark.parametrize(("text", "shown"), [
    (f"ssh h1 'env MLFLOW_TRACKING_URI={PASSWORD_URI} python'",
     "ssh h1 'env MLFLOW_TRACKING_URI=http://ringflow:***@tracking.example:5000 python'"),
    ("env AWS_SECRET_ACCESS_KEY=s3cr3t PGPASSWORD='a b' HOME=/h run", "env AWS_SECRET_ACCESS_KEY=*** PGPASSWORD=*** "
                                                                     "HOME=/h run"),
    ("horovodrun -np 2 python -m trainer", "horovodrun -np 2 python -m trainer"),
    # a rank's own line (MLflow's error quoting its tracking URI), and a bare user that may be a token
    ("[1,0]<stdout>:mlflow.exceptions: API request to http://ringflow:hunter2@host:5000/api failed",
     "[1,0]<stdout>:mlflow.exceptions: API request to http://ringflow:***@host:5000/api failed"),
    ("https://ghp_t0ken@github.example/x", "https://***@github.example/x"),
])
def test_printed_commands_hide_credentials(text: str, shown: str) -> None:
    assert redact(text) == shown
