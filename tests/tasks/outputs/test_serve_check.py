"""The fresh process's requests: the SavedModel loaded by tf.saved_model.load gives the trained model's
probabilities, and scores a test split (None when it cannot)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.outputs.evaluate import evaluate
from tasks.outputs.serve_check import accuracy, predict
from tests.tasks.outputs.conftest import Exported


def test_the_serving_signature_gives_the_trained_model_s_probabilities(exported: Exported, tmp_path: Path) -> None:
    np.save(tmp_path / "images.npy", exported.images)
    predict(str(exported.savedmodel), str(tmp_path / "images.npy"), str(tmp_path / "out.npy"))
    probabilities = np.load(tmp_path / "out.npy")
    assert probabilities.shape == (5, 10) and np.allclose(probabilities, exported.expected, atol=1e-5)


def test_the_savedmodel_scores_the_test_split_as_the_evaluation_does(exported: Exported, digits_data: Path) -> None:
    scored = accuracy(str(exported.savedmodel), str(digits_data))
    assert scored == evaluate(exported.model_dir, digits_data).metrics["test_accuracy"]
