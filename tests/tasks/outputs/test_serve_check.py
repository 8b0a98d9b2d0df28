"""The serving check: the SavedModel loaded by tf.saved_model.load gives the trained model's probabilities."""
from __future__ import annotations

import numpy as np

from tasks.outputs.serve_check import predict
from tests.tasks.outputs.conftest import Exported


def test_the_serving_signature_gives_the_trained_model_s_probabilities(exported: Exported) -> None:
    probabilities = predict(str(exported.savedmodel), exported.images)
    assert probabilities.shape == (5, 10) and np.allclose(probabilities, exported.expected, atol=1e-5)
