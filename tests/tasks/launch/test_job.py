"""A training job: its limits, who leads it, what it ships, running its processes and stopping them however it
ends, launching again when a server's port was taken, and the model directory that appears only when it succeeds."""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from tasks.launch import job as job_module
from tasks.launch.job import TrainResult, job_limits, launch, lead_host, run_job, shipment, train
from tasks.launch.job_config import job_spec
from tasks.launch.launchers import base as launchers_base
from tasks.launch.output.diagnosis import RankFailed
from tasks.launch.preflight import LaunchCheck
from tasks.launch.supervise.processes import Process
from tasks.params import Params
from trainer.checkpoint_files import OWNER_FILE
from trainer.config import CONFIG_FILE_NAME, ElasticParams, JobSpec, TrainParams, read_config
from trainer.model_io import write_train_summary
from trainer.protocol import METRICS_SPOOL_ENV

MANIFEST = {"image_shape": [8, 8, 1], "fingerprint": "f", "splits": {"train": {"count": 400,
                                                                             "shards": [{"count": 100}] * 4}}}


def params(**train: Any) -> Params:
    return Params(train=TrainParams(**train))


def prepared(tmp_path: Path) -> Path:
    """A data directory with a manifest (all the launch reads of the data before the processes start)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    return data_dir


def python_process(code: str, label: str | None = "0") -> Process:
    return Process([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, label)


def test_the_job_limits_come_from_the_train_params() -> None:
    limits = job_limits(params(stall_timeout_seconds=30, timeout_minutes=1.5))
    assert (limits.stall_seconds, limits.timeout_seconds, limits.silence_ends_job) == (30, 90, True)
    assert job_limits(params()).timeout_seconds is None


def test_a_silent_rank_does_not_end_an_elastic_job() -> None:
    assert not job_limits(params(np=2, elastic=ElasticParams(min_np=1, max_np=2))).silence_ends_job


def test_the_lead_is_rank_0_of_horovodrun() -> None:
    assert lead_host([Process(["horovodrun"], {}, hosts=("h2", "h1"))]) == "h2"


def test_the_lead_is_worker_0_of_a_multiworker_job() -> None:
    processes = [Process(["w"], {}, "1", hosts=("h1",)), Process(["w"], {}, "0", hosts=("h2",))]
    assert lead_host(processes) == "h2"


def test_the_lead_of_a_parameter_server_job_is_its_coordinator() -> None:
    processes = [Process(["s"], {}, "worker0", False, ("h1",)), Process(["s"], {}, "ps0", False, ("h2",)),
                 Process(["c"], {}, "chief0", hosts=("h3",))]
    assert lead_host(processes) == "h3"


def test_only_the_job_s_hosts_without_the_shared_filesystem_get_its_files() -> None:
    check = LaunchCheck("gloo", unshared_hosts=("h2", "h3", "unused"), hosts_with_data=("h3",))
    processes = [Process(["horovodrun"], {}, hosts=("h1", "h2", "h3"))]
    to_ship = shipment(check, processes)
    assert (to_ship.hosts, to_ship.lead, to_ship.hosts_with_data) == (("h2", "h3"), "h1", ("h3",))


def job_for(tmp_path: Path) -> JobSpec:
    return JobSpec(data_dir=tmp_path / "data", out_dir=tmp_path / "out", checkpoint_dir=tmp_path / "ckpt",
                   checkpoint_owner="me", augment=False, data_fingerprint="f", metrics_retry_seconds=60)


def test_a_job_s_lines_reach_the_caller_and_it_ends_when_its_processes_do(tmp_path: Path) -> None:
    lines: list[str] = []
    run_job([python_process("print('epoch 1')")], params(), job_for(tmp_path), tmp_path / "c.json",
            LaunchCheck(None), lines.append)
    assert lines == ["[0]<stdout>:epoch 1"]


def test_whatever_ended_the_job_its_ranks_are_stopped_and_results_brought_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    after: list[tuple[str, Any]] = []
    monkeypatch.setattr(launchers_base, "stop_job_processes", lambda hosts, marker: after.append(("stop", marker)))
    monkeypatch.setattr(job_module, "bring_back",
                        lambda to_ship, out_dir, checkpoint_dir, on_line, failed: after.append(("back", failed)))
    run_job([python_process("pass")], params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck(None), print)
    assert after == [("stop", str(tmp_path / "c.json")), ("back", False)]
    after.clear()
    with pytest.raises(RankFailed):
        run_job([python_process("raise SystemExit(3)")], params(), job_for(tmp_path), tmp_path / "c.json",
                LaunchCheck(None), print)
    assert after == [("stop", str(tmp_path / "c.json")), ("back", True)]


class Attempts:
    """run_job as the launch calls it: each attempt's processes recorded, and the given failures raised in turn."""

    def __init__(self, *failures: RankFailed | None) -> None:
        self.failures = list(failures)
        self.processes: list[list[Process]] = []

    def __call__(self, processes: list[Process], *args: Any) -> None:
        self.processes.append(processes)
        failure = self.failures.pop(0) if self.failures else None
        if failure:
            raise failure


def port_taken() -> RankFailed:
    return RankFailed("rank 1 on h1: its port was taken", retryable=True, port_taken=True)


def test_a_port_taken_at_the_start_launches_the_job_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = Attempts(port_taken(), None)
    monkeypatch.setattr(job_module, "run_job", attempts)
    lines: list[str] = []
    launch(params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck("gloo"), "run-1", lines.append)
    assert len(attempts.processes) == 2
    assert "rank 1 on h1: its port was taken; launching again with new ports (2 of 3)" in lines
    assert sum(line.startswith("launching: ") and "horovodrun_cli.py --gloo -np 2" in line for line in lines) == 2


def test_a_port_taken_every_time_fails_after_the_last_attempt(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_module, "LAUNCH_ATTEMPTS", 2)
    attempts = Attempts(port_taken(), port_taken(), port_taken())
    monkeypatch.setattr(job_module, "run_job", attempts)
    with pytest.raises(RankFailed, match="its port was taken"):
        launch(params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck("gloo"), None, print)
    assert len(attempts.processes) == 2


def test_any_other_failure_is_not_launched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = Attempts(RankFailed("rank 0 ran out of memory", retryable=True))
    monkeypatch.setattr(job_module, "run_job", attempts)
    with pytest.raises(RankFailed, match="out of memory"):
        launch(params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck("gloo"), None, print)
    assert len(attempts.processes) == 1


def test_rank_0_spools_its_metrics_itself_only_when_it_shares_this_filesystem(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = Attempts()
    monkeypatch.setattr(job_module, "run_job", attempts)
    launch(params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck("gloo"), "run-1", print)
    launch(params(), job_for(tmp_path), tmp_path / "c.json", LaunchCheck("gloo", unshared_hosts=("h2",)), "run-1",
           print)
    shared, unshared = (processes[0].env for processes in attempts.processes)
    assert shared[METRICS_SPOOL_ENV] == "1" and METRICS_SPOOL_ENV not in unshared
    assert "MLFLOW_RUN_ID" not in shared  # the launcher logs rank 0's metric lines: no rank talks to MLflow


def test_a_trained_job_s_model_directory_appears_with_its_config_and_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []

    def lead_saves_its_summary(run_params: Params, job: JobSpec, config_file: Path, *args: Any) -> None:
        assert read_config(config_file).job == job and not (tmp_path / "model").exists()
        seen.append(config_file)
        write_train_summary({"history": {"loss": [1.0]}}, job.out_dir)

    monkeypatch.setattr(job_module, "launch", lead_saves_its_summary)
    result = train(params(), prepared(tmp_path), tmp_path / "model", tmp_path / "ckpt", None, print,
                   LaunchCheck("gloo"))
    assert result == TrainResult(tmp_path / "model", {"history": {"loss": [1.0]}})
    assert {path.name for path in (tmp_path / "model").iterdir()} == {CONFIG_FILE_NAME, "train_summary.json"}
    assert seen[0].parent != tmp_path / "model"  # written in a work directory that becomes the model directory


def test_a_failed_job_leaves_the_previous_model_directory_as_it_was(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights").write_text("last good")

    def fails(*args: Any) -> None:
        raise RankFailed("rank 1 exited with 1", retryable=False)

    monkeypatch.setattr(job_module, "launch", fails)
    with pytest.raises(RankFailed):
        train(params(), prepared(tmp_path), tmp_path / "model", tmp_path / "ckpt", None, print, LaunchCheck("gloo"))
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".model")] == []
    assert [path.name for path in (tmp_path / "model").iterdir()] == ["weights"]


def test_a_job_of_its_own_checkpoints_is_launched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's checkpoints are checked once, by the preflight of a resumed run (steps.preflight_step); the
    launch takes those of its own config and code."""
    launched: list[object] = []
    monkeypatch.setattr(job_module, "launch", lambda *args: launched.append(args))
    data_dir = prepared(tmp_path)
    (tmp_path / "ckpt").mkdir()
    mine = job_spec(params(), data_dir, tmp_path / "model", tmp_path / "ckpt").checkpoint_owner
    (tmp_path / "ckpt" / OWNER_FILE).write_text(json.dumps({"owner": mine}))
    with pytest.raises(FileNotFoundError, match="no training summary"):  # accepted: launched, but saved no model
        train(params(), data_dir, tmp_path / "model", tmp_path / "ckpt", None, print, LaunchCheck("gloo"))
    assert len(launched) == 1


def test_ranks_that_outlive_their_killed_launcher_are_stopped(tmp_path: Path) -> None:
    """The launcher (as horovodrun or mpirun killed by the OOM killer) dies and leaves a rank re-parented, out of
    its tree: the job's clean-up still finds it by the job's configuration file on its command line."""
    config_file = tmp_path / "job 1" / "trainer_config.json"
    rank = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(120)' {shlex.quote(str(config_file))}"
    launcher = Process(["sh", "-c", f"{rank} & echo $! > {shlex.quote(str(tmp_path / 'rank.pid'))}; kill -9 $$"],
                       {}, "0")
    with pytest.raises(RankFailed):
        run_job([launcher], params(), job_for(tmp_path), config_file, LaunchCheck(None), print)
    orphan = int((tmp_path / "rank.pid").read_text())
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE


def test_the_clean_up_reaches_every_host_a_rank_said_it_ran_on(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An elastic job's ranks run where the discovery script found hosts, not only the listed ones: the hosts the
    ranks name in their `rank R of N on HOST` lines are cleaned too."""
    stopped: list[list[str]] = []
    monkeypatch.setattr(launchers_base, "stop_job_processes", lambda hosts, marker: stopped.append(hosts))
    horovodrun = python_process("print('[0]<stdout>:rank 0 of 2 on h7'); print('[1]<stdout>:rank 1 of 2 on h9')",
                                label=None)
    run_job([replace(horovodrun, hosts=("h1", "h2"))], params(), job_for(tmp_path), tmp_path / "c.json",
            LaunchCheck(None), print)
    assert stopped == [["h1", "h2", "h7", "h9"]]
