"""Load a SavedModel with tf.saved_model.load and run its serving signature: used in a fresh process.

python -m tasks.outputs.serve_check SAVEDMODEL IMAGES.npy OUT.npy

The process imports TensorFlow first and then waits for a line on its standard input before it reads the files, so
that export can start it before the SavedModel exists (its start overlaps the writing); end of input: nothing to do.
"""
from __future__ import annotations

import sys

import numpy as np


def predict(savedmodel: str, images: np.ndarray) -> np.ndarray:
    """Class probabilities from the `serving_default` signature."""
    import tensorflow as tf
    serve = tf.saved_model.load(savedmodel).signatures["serving_default"]
    return serve(images=tf.constant(images, tf.float32))["probabilities"].numpy()


if __name__ == "__main__":
    import tensorflow  # noqa: F401  (while the caller writes the SavedModel)
    savedmodel_path, images_path, out_path = sys.argv[1:4]
    if sys.stdin.readline():
        np.save(out_path, predict(savedmodel_path, np.load(images_path)))
