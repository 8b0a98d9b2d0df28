"""What a job's processes inherit: an allow-list of this environment, never a secret; MLflow's settings in a file
only its owner reads; printed commands with their credentials hidden."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tasks.launch.environment import (
    forwarded,
    held_rank_secrets,
    rank_environment,
    remove_abandoned_secrets,
    tracking_environment,
)
from tasks.paths import MLRUNS_DIR, ROOT
from tasks.redaction import is_secret, redact
from trainer.metrics_sink import load_tracking_settings
from trainer.protocol import RANK_SECRETS_ENV

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


def test_rank_0_logs_to_the_run_it_is_given_with_its_settings_from_a_file(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    monkeypatch.setenv("MLFLOW_RUN_ID", "inherited")
    env = rank_environment("run-1", tmp_path / "secrets.json")
    assert (env["MLFLOW_RUN_ID"], env[RANK_SECRETS_ENV]) == ("run-1", str(tmp_path / "secrets.json"))
    assert "MLFLOW_TRACKING_URI" not in env
    with pytest.raises(ValueError):
        rank_environment("run-1")


def test_without_a_run_no_inherited_run_reaches_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_RUN_ID", "inherited")
    env = rank_environment()
    assert "MLFLOW_RUN_ID" not in env and RANK_SECRETS_ENV not in env
    assert os.environ["MLFLOW_RUN_ID"] == "inherited"  # this process's own environment is left alone


def test_the_tracking_settings_name_this_workspace_s_store_or_the_configured_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_environment({})["MLFLOW_TRACKING_URI"] == f"sqlite:///{MLRUNS_DIR / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", PASSWORD_URI)
    settings = tracking_environment({"MLFLOW_TRACKING_TOKEN": "t", "MLFLOW_RUN_ID": "r", "HOME": "/h"})
    assert settings == {"MLFLOW_TRACKING_URI": PASSWORD_URI, "MLFLOW_TRACKING_TOKEN": "t"}


def test_the_settings_file_is_its_owner_s_alone_and_rank_0_reads_it(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    os.umask(old := os.umask(0))  # the most permissive umask: the file must still be private
    try:
        with held_rank_secrets(tmp_path, {"MLFLOW_TRACKING_URI": PASSWORD_URI}) as path:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            monkeypatch.setenv(RANK_SECRETS_ENV, str(path))
            monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///unused.db")  # recorded: the test's end puts it back
            monkeypatch.delenv("MLFLOW_TRACKING_URI")
            load_tracking_settings()
            assert os.environ["MLFLOW_TRACKING_URI"] == PASSWORD_URI
            assert remove_abandoned_secrets([tmp_path.parent]) == [] and path.exists()  # held by its launcher
    finally:
        os.umask(old)
    assert not path.exists()


def test_a_secrets_file_a_killed_launcher_left_is_removed_at_the_next_launch(tmp_path: Path) -> None:
    """SIGKILL of the launcher while its job runs: the file stays, unlocked; the next launch removes it."""
    import signal
    import subprocess
    import sys
    job_dir = tmp_path / "runs" / "abc" / ".model.tmp-1"
    job_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", f"""
from pathlib import Path
import time
from tasks.launch.environment import held_rank_secrets
with held_rank_secrets(Path({str(job_dir)!r}), {{"MLFLOW_TRACKING_URI": {PASSWORD_URI!r}}}):
    print("held", flush=True)
    time.sleep(600)
"""], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    left = job_dir / ".rank-secrets.json"
    assert remove_abandoned_secrets([job_dir.parent]) == [] and left.exists()  # its launcher runs
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert left.exists()
    assert remove_abandoned_secrets([job_dir.parent]) == [left] and not left.exists()


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
