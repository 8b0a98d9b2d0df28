"""Rank 0's epoch lines reach the pruner as they come; a trial below the median is stopped by raising."""
from __future__ import annotations

import pytest

from tasks.sweep.pruning import EpochReporter, TrialPruned, rank0_epoch
from tasks.sweep.search import make_study
from tasks.sweep.space import SweepParams


@pytest.mark.parametrize("line", ["[0]<stdout>:epoch 3: loss=0.2 val_accuracy=0.91",
                                  "[1,0]<stdout>:epoch 3: loss=0.2 val_accuracy=0.91",
                                  "epoch 3: loss=0.2 val_accuracy=0.91"])
def test_rank_0_s_epoch_line_is_read_however_the_launcher_tagged_it(line: str) -> None:
    assert rank0_epoch(line) == (3, {"loss": 0.2, "val_accuracy": 0.91})


@pytest.mark.parametrize("line", ["[1]<stdout>:epoch 3: val_accuracy=0.91", "[0]<stdout>:resuming from checkpoint",
                                  "launching: horovodrun -np 2"])
def test_other_ranks_and_other_lines_report_nothing(line: str) -> None:
    assert rank0_epoch(line) is None


def test_a_trial_below_the_median_is_pruned_and_every_line_still_goes_on() -> None:
    study = make_study(SweepParams(method="random", prune_after_trials=1, prune_after_epochs=1))
    good = study.ask()
    passed: list[str] = []
    reporter = EpochReporter(good, "val_accuracy", passed.append, epochs=3)
    for epoch, value in enumerate((0.8, 0.9, 0.95), start=1):
        reporter(f"[0]<stdout>:epoch {epoch}: val_accuracy={value}")
    study.tell(good, 0.95)
    assert reporter.values == [0.8, 0.9, 0.95] and len(passed) == 3
    bad = study.ask()
    reporter = EpochReporter(bad, "val_accuracy", passed.append, epochs=3)
    reporter("[0]<stdout>:epoch 1: val_accuracy=0.1")  # its first epoch: not yet
    with pytest.raises(TrialPruned, match=r"^after epoch 2: val_accuracy 0.1 is below the other") as pruned:
        reporter("[0]<stdout>:epoch 2: val_accuracy=0.1")
    assert pruned.value.epoch == 2 and len(passed) == 5


def test_a_trial_is_never_pruned_at_its_last_epoch() -> None:
    """Its training is done then: stopping it would only lose a finished result (a trial that reached its last
    epoch before the pruner had enough finished trials to judge it)."""
    study = make_study(SweepParams(method="random", prune_after_trials=1, prune_after_epochs=1))
    good = study.ask()
    reporter = EpochReporter(good, "val_accuracy", lambda line: None, epochs=2)
    for epoch, value in enumerate((0.8, 0.9), start=1):
        reporter(f"[0]<stdout>:epoch {epoch}: val_accuracy={value}")
    study.tell(good, 0.9)
    bad = EpochReporter(study.ask(), "val_accuracy", lambda line: None, epochs=2)
    bad("[0]<stdout>:epoch 1: val_accuracy=0.1")
    bad("[0]<stdout>:epoch 2: val_accuracy=0.1")  # below the median, at its last epoch: not pruned
    assert bad.values == [0.1, 0.1]
