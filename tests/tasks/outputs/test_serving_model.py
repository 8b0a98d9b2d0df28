"""The MLflow pyfunc model of the SavedModel: a batch of images in, the serving signature's probabilities out."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tasks.outputs.serving_model import SavedModelClassifier
from tests.tasks.outputs.conftest import Exported


def test_the_pyfunc_model_serves_the_savedmodel_it_is_given(exported: Exported) -> None:
    classifier = SavedModelClassifier()
    classifier.load_context(SimpleNamespace(artifacts={"savedmodel": str(exported.savedmodel)}))
    probabilities = classifier.predict(None, exported.images.astype(np.float64))  # any numeric input
    assert np.allclose(probabilities, exported.expected, atol=1e-5)
