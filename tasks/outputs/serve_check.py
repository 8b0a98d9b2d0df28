"""Load a SavedModel with tf.saved_model.load and run its serving signature: used in a fresh process.

python -m tasks.outputs.serve_check, then on its standard input: ["SAVEDMODEL", "IMAGES.npy", "OUT.npy"]

The process imports TensorFlow first and then waits for that line, so that it can be started before the SavedModel
exists (its start overlaps the evaluation and the writing); end of input: nothing to do.
"""
from __future__ import annotations

import json
import sys

import numpy as np


def predict(savedmodel: str, images: np.ndarray) -> np.ndarray:
    """Class probabilities from the `serving_default` signature."""
    import tensorflow as tf
    serve = tf.saved_model.load(savedmodel).signatures["serving_default"]
    return serve(images=tf.constant(images, tf.float32))["probabilities"].numpy()


if __name__ == "__main__":
    import tensorflow  # noqa: F401  (while the caller evaluates and writes the SavedModel)
    if asked := sys.stdin.readline():
        savedmodel_path, images_path, out_path = json.loads(asked)
        np.save(out_path, predict(savedmodel_path, np.load(images_path)))
