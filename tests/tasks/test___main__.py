"""`python -m tasks STEP`: the dvc.yaml stages and the steps that are not stages, each ending in one line; every
failure is one `error:` line with exit 2 for bad input, 1 otherwise."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tasks.__main__ as cli
from tasks import steps
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR
from tasks.tracking.model_registry import GateDecision
from tasks.tracking.run_labels import RunSource
from tasks.versioning.dvc import DataVersion


def test_the_steps_are_the_dvc_stages_and_the_others() -> None:
    assert cli.RUN_STEP_NAMES == ["train", "evaluate", "export", "register"]
    for step in ["prepare", "version", "train", "evaluate", "export", "register", "restore", "compare"]:
        assert cli.parse_args([step]).step == step


def test_an_unknown_step_is_refused_with_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse_args(["deploy"])
    assert exited.value.code == 2 and "invalid choice: 'deploy'" in capsys.readouterr().err


def test_the_options_have_their_defaults_and_overrides_add_up() -> None:
    args = cli.parse_args(["compare", "--set", "epochs=3", "--set", "train.np=4"])
    assert (args.last, args.csv, args.run_id, args.data_hash) == (5, OUTPUTS_DIR / "compare.csv", None, None)
    assert args.overrides == ["epochs=3", "train.np=4"]
    assert cli.parse_args(["compare", "--last", "2", "--csv", "x.csv"]).csv == Path("x.csv")


def test_help_shows_the_steps_that_are_not_stages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse_args(["--help"])
    assert exited.value.code == 0 and "restore --run-id ID" in capsys.readouterr().out


def test_a_bad_override_ends_in_one_error_line_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version", "--set", "nosuchparam=1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "error: bad parameter nosuchparam: no such parameter"


def test_restore_without_a_run_or_hash_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["restore"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "error: restore needs --run-id or --data-hash"


def test_a_failing_step_ends_in_its_first_line_with_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    def push_fails() -> DataVersion:
        raise RuntimeError("dvc push failed: remote unreachable\nTraceback ...")
    monkeypatch.setattr(steps, "version_step", push_fails)
    assert cli.main(["version"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "error: dvc push failed: remote unreachable"


def test_a_step_that_succeeds_prints_its_result_and_exits_0(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(steps, "version_step", lambda: DataVersion("abc123", "deadbeef", False))
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == "data version: abc123\n"


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The steps a stage calls, in order, with what they are given (the params as "params"; the run published now
    is `published-run`)."""
    made: list[tuple] = []
    decision = GateDecision("ringflow", "3", "champion", 0.9, None, None, None, 0.001, "split")

    def step(name: str, result: Any):
        def record(*args: Any, **kwargs: Any) -> Any:
            said = ["params" if isinstance(arg, Params) else arg for arg in args]
            made.append((name, *said, *kwargs.items()))
            return result
        return record

    monkeypatch.setattr(cli, "published_run", lambda name: "published-run" if name == "model" else "other")
    monkeypatch.setattr(steps, "preflight_step", step("preflight", "the-check"))
    monkeypatch.setattr(steps, "open_run_step", step("open-run", "new-run"))
    monkeypatch.setattr(steps, "train_step", step("train", Path("model")))
    monkeypatch.setattr(steps, "evaluate_step", step("evaluate", {"test_accuracy": 0.9}))
    monkeypatch.setattr(steps, "export_step", step("export", Path("/artifacts/savedmodel")))
    monkeypatch.setattr(steps, "register_step", step("register", decision))
    monkeypatch.setattr(steps, "publish_step", step("publish", "dvc.lock is written by dvc repro"))
    return made


def test_the_train_stage_opens_a_run_trains_and_publishes_the_model(calls: list[tuple]) -> None:
    assert cli.stage("train", Params()) == "mlflow run: new-run"
    source = RunSource("dvc repro (python -m tasks train)")  # the run's Source in MLflow's UI
    assert calls == [("preflight", "params", None),
                     ("open-run", "params", "the-check", None, None, steps.RunLabels(source)),
                     ("train", "params", "new-run", "the-check", print, True),
                     ("publish", "params", "new-run", ["model"], ("record", False), ("finish", False))]


@pytest.mark.parametrize(("step", "printed", "published"), [
    ("evaluate", "{'test_accuracy': 0.9}", ["metrics.json", "evaluation"]),
    ("export", "savedmodel: /artifacts/savedmodel", ["savedmodel"]),
    ("register", "ringflow v3 is champion: first model (test accuracy 0.9000)", ["gate.json"]),
])
def test_a_later_stage_works_on_the_run_whose_model_is_published(calls: list[tuple], step: str, printed: str,
                                                                 published: list[str]) -> None:
    """Each publishes its own items; the register stage, the run's last, also applies the gate and ends the run."""
    assert cli.stage(step, Params()) == printed
    assert calls[0][:2] == (step, "published-run") and len(calls) == 2
    assert calls[1] == ("publish", "params", "published-run", published, ("record", False),
                        ("finish", step == "register"))
