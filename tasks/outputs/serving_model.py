"""The MLflow pyfunc model of ringflow's SavedModel.

Its input is a DataFrame (or a dict of columns) with one of two columns:
- `image`: encoded images (JPEG, PNG, GIF, BMP; any size), as bytes (MLflow decodes a `binary` column of a
  `dataframe_split` or `inputs` request from base64) or as base64 text -> the SavedModel's `serving_bytes` signature;
- `pixels`: float images of the model's input shape (0..255), one per row, each flattened (height, width, channels
  in that order: `pd.DataFrame({"pixels": list(images.reshape(len(images), -1))})`) -> its `serving_default`
  signature.
Its output has one row per image: `class` (the name of the most likely class), `score` (its probability),
`probabilities` (every class's, by name) and `error` (why an image could not be used; empty when it could).

A tensor model (its `serving_default` takes float32 features "x"): its input is the features, an array [N,
*feature_shape] (or rows of numbers, flattened, e.g. a DataFrame of feature columns); a regressor's output is
its predictions [N, k], a classifier's the rows above (`error` empty).

Logged as MLflow "models from code": this one file is all the serving side ships (it imports only MLflow, NumPy,
pandas and, when loaded, TensorFlow); the SavedModel travels as the model's `savedmodel` artifact, the class names
in its model config.
"""
from __future__ import annotations

import base64
from typing import Any

import mlflow.models
import mlflow.pyfunc
import numpy as np
import pandas as pd

IMAGE, PIXELS = "image", "pixels"  # the input's columns
OUTPUTS = ("class", "score", "probabilities", "error")  # the output's columns


def as_bytes(item: Any) -> bytes:
    """An encoded image given as bytes or as base64 text."""
    if isinstance(item, (bytes, bytearray)):
        return bytes(item)
    try:
        return base64.b64decode(str(item), validate=True)
    except ValueError:
        return str(item).encode()  # not base64: the bytes signature says it is not an image


def columns_of(model_input: Any) -> dict[str, Any]:
    """The input's columns by name (a DataFrame's, or a dict's)."""
    if isinstance(model_input, dict):
        return model_input
    return {name: model_input[name] for name in getattr(model_input, "columns", [])}


def answer_columns(scores: np.ndarray, errors: list[str], class_names: list[str]) -> dict[str, list[Any]]:
    """The output's columns (OUTPUTS) from each image's class scores and error (make serve-model answers MLflow's
    requests with them too)."""
    best = scores.argmax(axis=1)
    return {"class": [class_names[index] if not error else "" for index, error in zip(best, errors)],
            "score": [float(row[index]) if not error else 0.0 for row, index, error in zip(scores, best, errors)],
            "probabilities": [dict(zip(class_names, map(float, row))) for row in scores], "error": list(errors)}


class SavedModelClassifier(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    """Serves the exported SavedModel's two signatures with the class names of its training data."""

    def load_context(self, context: Any) -> None:
        import tensorflow as tf
        signatures = tf.saved_model.load(context.artifacts["savedmodel"]).signatures
        self._floats, self._bytes = signatures["serving_default"], signatures.get("serving_bytes")
        ((self._input, spec),) = self._floats.structured_input_signature[1].items()  # "images", or a tensor's "x"
        self._shape = [-1, *spec.shape[1:]]
        self._names = [str(name) for name in context.model_config["classes"]]

    def _tensor_answer(self, model_input: Any) -> Any:
        """A tensor model's answer: a regressor's predictions [N, k], a classifier's rows."""
        import tensorflow as tf
        if isinstance(model_input, dict):
            model_input = model_input.get("x", model_input)
        features = np.asarray(getattr(model_input, "values", model_input), np.float32).reshape(self._shape)
        answer = self._floats(x=tf.constant(features))
        if "probabilities" not in answer:
            return answer["predictions"].numpy()
        scores = answer["probabilities"].numpy()
        return pd.DataFrame(answer_columns(scores, [""] * len(scores), self._names))

    # model_input's hint is the one MLflow reads no schema from (a tensor model's input is an array: the logged
    # signature says which); without one, MLflow warns at every load of this file
    def predict(self, context, model_input: pd.DataFrame, params=None):
        """One row per image: its class name and score, every class's probability by name, its error."""
        import tensorflow as tf
        if self._input == "x":
            return self._tensor_answer(model_input)
        columns = columns_of(model_input)
        if IMAGE in columns:
            answer = self._bytes(images_bytes=tf.constant([as_bytes(item) for item in columns[IMAGE]], tf.string))
            scores, errors = answer["scores"].numpy(), [error.decode() for error in answer["errors"].numpy()]
        elif PIXELS in columns:
            images = np.stack([np.asarray(item, np.float32).reshape(self._shape[1:]) for item in columns[PIXELS]])
            scores, errors = self._floats(images=tf.constant(images))["probabilities"].numpy(), [""] * len(images)
        else:
            raise ValueError(f"the input needs a column {IMAGE!r} (encoded images) or {PIXELS!r} (float images)")
        return pd.DataFrame(answer_columns(scores, errors, self._names))


mlflow.models.set_model(SavedModelClassifier())
