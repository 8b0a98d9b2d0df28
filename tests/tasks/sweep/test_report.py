"""The sweep's report: the best finished trial by the direction asked, and the two charts as PNG files."""
from __future__ import annotations

from pathlib import Path

from tasks.params import SweepParams
from tasks.sweep.report import best_trial, charts
from tasks.sweep.trial import TrialOutcome


def outcome(number: int, state: str, value: float | None) -> TrialOutcome:
    return TrialOutcome(number, f"run{number}", {"train.learning_rate": 0.001 * (number + 1)}, state, value, 3, 10.0)


def test_the_best_trial_is_a_finished_one_by_the_direction_asked() -> None:
    outcomes = [outcome(0, "finished", 0.9), outcome(1, "pruned", None), outcome(2, "finished", 0.95),
                outcome(3, "failed", None)]
    assert best_trial(outcomes, SweepParams()).number == 2  # type: ignore[union-attr]
    assert best_trial(outcomes, SweepParams(direction="minimize", metric="val_loss")).number == 0  # type: ignore
    assert best_trial([outcome(1, "pruned", None)], SweepParams()) is None


def test_the_charts_are_png_files_even_for_one_trial(tmp_path: Path) -> None:
    import optuna
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    trial.suggest_float("train.learning_rate", 1e-4, 1e-2, log=True)
    study.tell(trial, 0.9)
    written = charts(study, tmp_path, "val_accuracy")
    assert [path.name for path in written] == ["optimization_history.png", "parallel_coordinates.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in written)
