"""Export: a SavedModel whose `serving_default` takes float images and gives probabilities and classes; the test
images for the parity check come at the model's input shape. (The whole export, with its reload in a fresh process,
runs in the pipeline tests.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from tasks.outputs.export import sample_test_images
from tests.tasks.outputs.conftest import Exported


def test_the_serving_signature_takes_images_and_gives_probabilities_and_classes(exported: Exported) -> None:
    serve = tf.saved_model.load(str(exported.savedmodel)).signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["images"]
    given = serve(images=tf.constant(exported.images))
    assert sorted(given) == ["classes", "probabilities"]
    assert given["classes"].numpy().tolist() == np.argmax(exported.expected, axis=-1).tolist()


def test_the_parity_images_are_test_images_at_the_model_s_input(exported: Exported, digits_data: Path) -> None:
    images = sample_test_images(digits_data, exported.model_dir, limit=7)
    assert images.shape == (7, 8, 8, 1) and images.dtype == np.float32 and 0 <= images.min() < images.max() <= 255
