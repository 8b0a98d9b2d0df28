"""A trial's runner tries its training once more when its failure may pass (from its checkpoint: the same run),
never when its input is bad or the pruner stopped it. The training step itself is replaced here by one that fails
as asked: the real launches are tests/flows/test_sweep.py's."""
from __future__ import annotations

from typing import Any, Callable

import optuna
import pytest

from tasks import steps
from tasks.launch.output.diagnosis import RankFailed
from tasks.launch.preflight import LaunchCheck
from tasks.params import Params, ParamsError
from tasks.sweep import trial as trial_module
from tasks.sweep.pruning import TrialPruned
from tasks.sweep.trial import Sweep, TrialRunner


def train_trial(sweep: Sweep, trial: Any) -> TrialRunner:
    """A trial's training step (in run1) through the trial's runner."""
    runner = TrialRunner(sweep, trial)
    steps.run_steps(steps.RunContext(Params(), run_id="run1", check=LaunchCheck("gloo")), [steps.TRAIN], runner)
    return runner


def sweep_of(study: Any, said: list[str]) -> Sweep:
    return Sweep(Params(), Params().sweep, study, None, None, "parent", None, said.append)  # type: ignore[arg-type]


def training_that(failures: list[BaseException], calls: list[str]) -> Callable[..., Any]:
    """A train_step that raises the next of `failures` (each once), then reports 2 epochs."""
    def train_step(params: Params, run_id: str, check: Any, on_line: Callable[[str], None],
                   model_outputs: bool = True) -> None:
        calls.append(run_id)
        if failures:
            raise failures.pop(0)
        for epoch in (1, 2):
            on_line(f"[0]<stdout>:epoch {epoch}: val_accuracy=0.{epoch}")
    return train_step


def test_a_failure_that_may_pass_is_tried_once_more_in_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(trial_module.steps, "train_step",
                        training_that([RankFailed("rank 1 on h2 lost", retryable=True)], calls))
    said: list[str] = []
    study = optuna.create_study(direction="maximize")
    runner = train_trial(sweep_of(study, said), study.ask())
    assert calls == ["run1", "run1"] and runner.reporter.values == [0.1, 0.2] and runner.run_id == "run1"
    assert any("trying again from its last checkpoint" in line for line in said)


@pytest.mark.parametrize("failure", [
    RankFailed("out of memory", retryable=False),
    ParamsError("the global batch exceeds the training records"),
    RankFailed("lost", retryable=True), ])
def test_bad_input_or_a_second_failure_ends_the_trial(monkeypatch: pytest.MonkeyPatch,
                                                      failure: BaseException) -> None:
    calls: list[str] = []
    failures = [failure] + ([RankFailed("lost again", retryable=True)] if getattr(failure, "retryable", False)
                            else [])
    monkeypatch.setattr(trial_module.steps, "train_step", training_that(failures, calls))
    study = optuna.create_study(direction="maximize")
    with pytest.raises((RankFailed, ParamsError)):
        train_trial(sweep_of(study, []), study.ask())
    assert len(calls) == (2 if getattr(failure, "retryable", False) else 1)


def test_a_pruned_trial_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(trial_module.steps, "train_step", training_that([TrialPruned(3, 2, "val_accuracy", 0.1)],
                                                                        calls))
    study = optuna.create_study(direction="maximize")
    with pytest.raises(TrialPruned):
        train_trial(sweep_of(study, []), study.ask())
    assert calls == ["run1"]
