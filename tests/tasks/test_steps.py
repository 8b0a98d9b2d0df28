"""The pipeline's steps: their order written once (and matching dvc.yaml's stages), preparing the data under its
lock, and the dry run's plan, which contacts no host and opens no run."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tasks import steps
from tasks.atomic import lock_held
from tasks.data import data_lock
from tasks.data.validate import REPORT_NAME
from tasks.launch.errors import PreflightError
from tasks.launch.preflight import LaunchCheck
from tasks.params import DataParams, Params, ParamsError
from tasks.paths import ROOT
from trainer.config import TrainParams

# 8x8 grey images, 400 training records in 4 shards
MANIFEST = {"image_shape": [8, 8, 1], "fingerprint": "f", "splits": {"train": {"count": 400,
                                                                             "shards": [{"count": 100}] * 4}}}


@pytest.fixture()
def prepared_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The steps' prepared data and locks in tmp_path (a manifest only: nothing here reads the shards)."""
    data_dir = tmp_path / "data" / "prepared"
    data_dir.mkdir(parents=True)
    (data_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    monkeypatch.setattr(steps, "PREPARED_DIR", data_dir)
    monkeypatch.setattr(data_lock, "LOCK_FILE", tmp_path / "locks" / "prepared-data.lock")
    return data_dir


def test_the_pipeline_runs_its_steps_in_one_order() -> None:
    assert steps.PIPELINE_STEPS == ("prepare", "preflight", "version", "changes", "open-run", "train", "evaluate",
                                    "export", "register", "publish")
    assert steps.PUBLISHED_ITEMS == ["model", "metrics.json", "evaluation", "savedmodel", "gate.json"]


def test_a_step_is_found_by_name() -> None:
    export = steps.step_named("export")
    assert (export.name, export.publishes, export.retried) == ("export", ("savedmodel",), False)
    assert [step.name for step in steps.STEPS if step.retried] == ["train"]  # only a failure there may pass
    assert [step.name for step in steps.RUN_STEPS] == ["train", "evaluate", "export", "register"]
    with pytest.raises(StopIteration):
        steps.step_named("prepare")  # before a run's steps: once for one run or many


def names(chosen: tuple[steps.RunStep[Any], ...]) -> list[str]:
    return [step.name for step in chosen]


def test_each_entry_point_runs_a_part_of_the_one_sequence() -> None:
    assert steps.CHECKS + steps.OPENED == steps.STEPS  # the flow, which may skip an unchanged run between
    assert names(steps.TRAINING_RUN) == ["preflight", "open-run", "train"]  # a sweep's trial, a scaling run
    assert names(steps.AFTER_TRAINING) == ["evaluate", "export", "register", "publish"]  # a sweep's best trial
    assert names(steps.stage_steps("train")) == ["preflight", "open-run", "train", "publish"]  # the dvc.yaml stages
    assert names(steps.stage_steps("export")) == ["export", "publish"]


def test_one_driver_runs_the_chosen_steps_in_their_order_each_given_what_the_ones_before_gave() -> None:
    seen: list[tuple[str, Any, str]] = []
    gives: dict[str, Any] = {"preflight": LaunchCheck("gloo"), "open-run": "run1", "train": Path("model")}

    def runner(step: steps.RunStep[Any], given: steps.RunContext) -> Any:
        seen.append((step.name, given.check, given.run_id))
        return gives[step.name]
    run = steps.run_steps(steps.RunContext(Params()), [steps.TRAIN, steps.OPEN_RUN, steps.PREFLIGHT], runner)
    assert seen == [("preflight", None, ""), ("open-run", LaunchCheck("gloo"), ""),
                    ("train", LaunchCheck("gloo"), "run1")]
    assert (run.check, run.run_id, run.model_dir) == (LaunchCheck("gloo"), "run1", Path("model"))
    foreign = steps.RunStep("prepare", lambda run: None, lambda run, nothing: run, lambda run: "")
    with pytest.raises(ValueError, match="not a step of a pipeline run: prepare"):
        steps.run_steps(run, [foreign], runner)
    with pytest.raises(ValueError, match=r"run run1: this step needs the preflight's result"):
        steps.run_steps(steps.RunContext(Params(), run_id="run1"), [steps.TRAIN])  # the training without a preflight


def test_each_run_step_is_the_dvc_stage_of_its_name_and_publishes_what_the_stage_outputs() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for step in steps.RUN_STEPS:
        stage = stages[step.name]
        assert shlex.split(stage["cmd"])[1:] == ["-m", "tasks", step.name]
        outputs = [next(iter(out)) if isinstance(out, dict) else out
                   for out in stage.get("outs", []) + stage.get("metrics", [])]
        assert outputs and all(out.removeprefix("outputs/") in step.publishes for out in outputs), step.name


def test_converting_prepares_the_data_once_then_says_it_is_up_to_date(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "prepared"
    monkeypatch.setattr(steps, "PREPARED_DIR", data_dir)
    lines: list[str] = []
    assert steps.convert_step(Params(data=DataParams(min_shards=1)), lines.append) is False
    assert steps.convert_step(Params(data=DataParams(min_shards=1)), lines.append) is True
    assert lines == [f"prepared digits into {data_dir}",
                     f"prepare skipped: {data_dir} is up to date with digits and the data params"]


def test_preparing_converts_and_validates_under_the_lock_and_saves_the_report(prepared_dir: Path,
                                                                            tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "prepared-data.lock"
    seen: list[str] = []

    def convert(params: Params) -> bool:
        seen.append(f"convert locked={lock_held(lock)}")
        return True

    def check(data_dir: Path) -> dict[str, Any]:
        seen.append(f"check {data_dir == prepared_dir} locked={lock_held(lock)}")
        return {"valid": True}

    assert steps.prepare_step(Params(), convert=convert, check=check) == {"valid": True, "skipped": True}
    assert seen == ["convert locked=True", "check True locked=True"]
    assert json.loads((prepared_dir / REPORT_NAME).read_text()) == {"valid": True}
    assert not lock_held(lock)


def test_the_data_plan_step_reads_the_prepared_manifest(prepared_dir: Path) -> None:
    assert steps.data_plan_step(Params(), LaunchCheck("gloo")) == [
        "rank 0: 200 training records, 6 steps of 32, 8 dropped per epoch",
        "rank 1: 200 training records, 6 steps of 32, 8 dropped per epoch"]


def dry_run(params: Params, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The dry run's lines, and what it printed while preparing (preparing itself is the prepare step's)."""
    printed: list[str] = []
    monkeypatch.setattr(steps, "prepare_step", lambda params, on_line: on_line("prepared"))
    return steps.dry_run_step(params, printed.append), printed


def test_a_dry_run_prepares_then_says_the_steps_the_launch_and_the_data_plan(
        prepared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines, printed = dry_run(Params(train=TrainParams(controller="gloo")), monkeypatch)
    assert printed == ["prepared"]
    config = steps.RunWorkspace("<run id>").model_dir / "trainer_config.json"
    assert lines[:2] == ["steps: prepare -> preflight -> version -> changes -> open-run -> train -> evaluate -> "
                         "export -> register -> publish", "launch:"]
    assert lines[2].startswith("rank 0 on localhost, rank 1 on localhost: ")
    assert shlex.split(lines[2].split(": ", 1)[1])[-5:] == [sys.executable, "-m", "trainer", "--config", str(config)]
    assert lines[3:5] == ["listens: horovodrun's rendezvous (HTTP) on this machine, every interface (Horovod binds it "
                          "so), for the job", "listens: Gloo between the ranks on localhost, interface lo (this "
                          "machine only), for the job"]
    assert lines[5:] == ["data:", "rank 0: 200 training records, 6 steps of 32, 8 dropped per epoch",
                         "rank 1: 200 training records, 6 steps of 32, 8 dropped per epoch"]


def test_a_dry_run_names_the_hosts_it_did_not_contact(prepared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = Params(train=TrainParams(controller="gloo", hosts="localhost:1,h1.invalid:1,h2.invalid:1", np=3))
    lines, _ = dry_run(params, monkeypatch)
    assert lines[2].startswith("rank 0 on localhost, rank 1 on h1.invalid, rank 2 on h2.invalid: ")
    assert lines[5] == "hosts not checked (a dry run contacts no host): h1.invalid, h2.invalid"
    assert lines[6] == "data:"


def test_a_dry_run_refuses_what_would_fail_the_launch(prepared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PreflightError, match="exceeds the 400 training records"):
        dry_run(Params(train=TrainParams(controller="gloo", batch_size=300)), monkeypatch)


def test_restoring_needs_a_run_or_a_data_hash() -> None:
    with pytest.raises(ParamsError, match="^restore needs --run-id or --data-hash$"):
        steps.restore_step(None, None)
