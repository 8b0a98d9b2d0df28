"""The Optuna side of a sweep: samplers give values inside the space, a grid runs each combination once, and the
median pruner stops a trial whose epochs fall below the finished trials' median."""
from __future__ import annotations

from pathlib import Path

from tasks.sweep.report import charts
from tasks.sweep.search import make_study, suggest, trial_count
from tasks.sweep.space import SweepParams

SPACE = {"train.learning_rate": {"low": 0.0001, "high": 0.1, "log": True}, "train.epochs": {"low": 2, "high": 4},
         "train.model": ["cnn", "small_cnn"]}


def test_random_and_tpe_trials_take_values_inside_the_space() -> None:
    for method in ("random", "tpe"):
        sweep = SweepParams.model_validate({"method": method, "space": SPACE})
        study = make_study(sweep)
        for _ in range(6):
            trial = study.ask()
            chosen = suggest(trial, sweep)
            assert 0.0001 <= chosen["train.learning_rate"] <= 0.1 and chosen["train.epochs"] in (2, 3, 4)
            assert chosen["train.model"] in ("cnn", "small_cnn")
            study.tell(trial, chosen["train.learning_rate"])


def test_a_grid_runs_each_combination_once_and_no_more() -> None:
    sweep = SweepParams(method="grid", trials=10,
                        space={"train.batch_size": [16, 32], "train.model": ["cnn", "small_cnn"]})
    study, seen = make_study(sweep), []
    for _ in range(trial_count(sweep)):
        trial = study.ask()
        seen.append(tuple(suggest(trial, sweep).values()))
        study.tell(trial, 1.0)
    assert trial_count(sweep) == 4 and sorted(seen) == [(16, "cnn"), (16, "small_cnn"), (32, "cnn"), (32, "small_cnn")]


def test_the_median_pruner_stops_a_trial_below_the_finished_ones() -> None:
    sweep = SweepParams(method="random", prune_after_trials=2, prune_after_epochs=1)
    study = make_study(sweep)
    for _ in range(2):
        trial = study.ask()
        for epoch, value in enumerate((0.5, 0.8, 0.9)):
            trial.report(value, epoch)
        study.tell(trial, 0.9)
    bad = study.ask()
    bad.report(0.1, 0)
    assert not bad.should_prune()  # its first epoch: not yet
    bad.report(0.1, 1)
    assert bad.should_prune()


def test_list_valued_choices_are_sampled_queued_in_a_grid_and_charted(tmp_path: Path) -> None:
    ops = [["crop"], ["crop", "brightness"], []]
    for method in ("random", "grid"):
        sweep = SweepParams.model_validate({"method": method, "trials": 3, "space": {"input.augment_ops": ops}})
        study, seen = make_study(sweep), []
        for number in range(trial_count(sweep)):
            trial = study.ask()
            seen.append(suggest(trial, sweep)["input.augment_ops"])
            study.tell(trial, 0.5 + number / 10)
        assert all(choice in ops for choice in seen) and (method != "grid" or seen == ops)
        (tmp_path / method).mkdir()
        written = charts(study, tmp_path / method, "val_accuracy")  # a list once broke the parallel coordinates
        assert all(path.read_bytes().startswith(b"\x89PNG") for path in written)
