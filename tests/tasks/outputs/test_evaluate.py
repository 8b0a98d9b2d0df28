"""Evaluation scores (top-5 only with more than 10 classes, per-class precision/recall)."""
from __future__ import annotations

import numpy as np
import pytest

from tasks.outputs.evaluate import score


def one_hot_guesses(predicted: list[int], classes: int, second: list[int] | None = None) -> np.ndarray:
    """Probabilities putting 0.6 on `predicted` and, when given, 0.3 on `second`; the rest small, decreasing
    with the class index (no ties)."""
    probabilities = np.tile(np.linspace(0.009, 0.001, classes), (len(predicted), 1))
    probabilities[np.arange(len(predicted)), predicted] = 0.6
    if second is not None:
        probabilities[np.arange(len(predicted)), second] = 0.3
    return probabilities


def test_ten_classes_have_no_top5_and_exact_precision_recall() -> None:
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 9])
    predicted = [0, 1, 1, 1, 2, 0, 3, 4, 5, 6, 7, 8, 9, 9]
    evaluation = score(one_hot_guesses(predicted, 10), labels, [str(i) for i in range(10)])
    assert set(evaluation.metrics) == {"test_loss", "test_accuracy"}
    assert evaluation.metrics["test_accuracy"] == pytest.approx(12 / 14)
    rest = np.linspace(0.009, 0.001, 10)
    expected_loss = -(12 * np.log(0.6) + np.log(rest[0]) + np.log(rest[2])) / 14
    assert evaluation.metrics["test_loss"] == pytest.approx(expected_loss)
    assert evaluation.per_class["0"] == {"precision": 0.5, "recall": 0.5, "support": 2}
    assert evaluation.per_class["1"] == {"precision": pytest.approx(2 / 3), "recall": 1.0, "support": 2}
    assert evaluation.per_class["2"] == {"precision": 1.0, "recall": 0.5, "support": 2}
    assert evaluation.confusion[0, 1] == 1 and evaluation.confusion[2, 0] == 1 and evaluation.confusion.sum() == 14


def test_more_than_ten_classes_add_top5_accuracy() -> None:
    labels = np.array([0, 1, 2, 11])
    evaluation = score(one_hot_guesses([5, 1, 7, 3], 12, second=[0, 4, 8, 10]), labels,
                       [f"class {i}" for i in range(12)])
    assert evaluation.metrics["test_accuracy"] == pytest.approx(1 / 4)
    # top 5: the two guesses, then the lowest class indices: label 0 and 2 are in, 11 is out
    assert evaluation.metrics["test_top5_accuracy"] == pytest.approx(3 / 4)
    assert evaluation.per_class["class 11"] == {"precision": 0.0, "recall": 0.0, "support": 1}
