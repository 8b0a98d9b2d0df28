"""The MLflow pyfunc model of ringflow's SavedModel: images (float32, 0..255) -> class probabilities.

Logged as MLflow "models from code": this one file is all the serving side ships (it imports only MLflow, NumPy
and, when loaded, TensorFlow); the SavedModel travels as the model's `savedmodel` artifact.
"""
from __future__ import annotations

from typing import Any

import mlflow.models
import mlflow.pyfunc
import numpy as np


class SavedModelClassifier(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    """Serves the `serving_default` signature of the exported SavedModel."""

    def load_context(self, context: Any) -> None:
        import tensorflow as tf
        self._serve = tf.saved_model.load(context.artifacts["savedmodel"]).signatures["serving_default"]

    def predict(self, context, model_input, params=None):  # untyped: MLflow reads predict's hints as a schema
        """Class probabilities for a batch of images."""
        import tensorflow as tf
        images = tf.constant(np.asarray(model_input, dtype=np.float32))
        return self._serve(images=images)["probabilities"].numpy()


mlflow.models.set_model(SavedModelClassifier())
