"""Evaluation scores (top-5 only with more than 10 classes, per-class precision/recall)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tasks.launch.job_config import job_spec, write_trainer_config
from tasks.outputs.evaluate import (
    NoTestPredictions,
    TrainedOnOtherData,
    check_trained_on,
    evaluate,
    outputs_written,
    score,
)
from tasks.params import Params
from tests.tasks.outputs.conftest import Exported
from trainer.model_io import MODEL_SPEC, MODEL_WEIGHTS
from trainer.prepared_data import MANIFEST_NAME


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


def test_a_model_is_evaluated_only_on_the_data_it_was_trained_on(digits_data: Path, tmp_path: Path) -> None:
    """The model's job file names the data's fingerprint; data re-prepared or restored since is refused in one
    line that says what to do (bad input: evaluating again changes nothing)."""
    params = Params()
    model_dir = tmp_path / "model"
    write_trainer_config(params, job_spec(params, digits_data, model_dir, tmp_path / "checkpoints"))
    check_trained_on(model_dir, digits_data)  # the same data: nothing to say
    other = tmp_path / "other data"
    shutil.copytree(digits_data, other)
    manifest = json.loads((other / MANIFEST_NAME).read_text())
    (other / MANIFEST_NAME).write_text(json.dumps(manifest | {"fingerprint": "f" * 32}))
    with pytest.raises(TrainedOnOtherData, match=r"^the prepared data changed since the model was trained "
                                                 r"\(fingerprint ffffffffffff, trained on \w{12}\): put that data "
                                                 r"back \(python -m tasks restore --run-id RUN\) or train again$"):
        check_trained_on(model_dir, other)
    assert TrainedOnOtherData.bad_input


def test_a_model_without_test_predictions_is_one_line_that_says_to_train_again(digits_data: Path,
                                                                               tmp_path: Path) -> None:
    with pytest.raises(NoTestPredictions, match=r"^no test predictions: .*test_predictions.npz is missing \(its "
                                                r"training wrote none: train again\)$"):
        evaluate(tmp_path, digits_data)
    assert NoTestPredictions.bad_input


def test_a_model_trained_without_its_outputs_gets_them_in_a_process_of_its_own(exported: Exported, digits_data: Path,
                                                                              tmp_path: Path) -> None:
    """A sweep's trials train without them; the best one's evaluation writes them first, alike."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for name in (MODEL_SPEC, MODEL_WEIGHTS):
        shutil.copy(exported.model_dir / name, model_dir / name)
    outputs_written(model_dir, digits_data)
    assert evaluate(model_dir, digits_data).metrics == evaluate(exported.model_dir, digits_data).metrics
    assert (model_dir / "savedmodel" / "saved_model.pb").is_file() and (model_dir / "parity_sample.npz").is_file()
