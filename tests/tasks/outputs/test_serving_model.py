"""The MLflow pyfunc model of the SavedModel: encoded images (bytes or base64 text) or float pixels in; each image's
class name, score, every class's probability and its error out."""
from __future__ import annotations

import base64
import io
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tasks.outputs.serving_model import SavedModelClassifier
from tests.tasks.outputs.conftest import Exported

CLASS_NAMES = [str(index) for index in range(10)]


@pytest.fixture(scope="module")
def classifier(exported: Exported) -> SavedModelClassifier:
    model = SavedModelClassifier()
    model.load_context(SimpleNamespace(artifacts={"savedmodel": str(exported.savedmodel)},
                                       model_config={"classes": CLASS_NAMES}))
    return model


def png(image: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image[..., 0].astype(np.uint8)).save(out, "PNG")
    return out.getvalue()


def test_float_pixels_give_the_savedmodels_probabilities_by_class_name(classifier: SavedModelClassifier,
                                                                        exported: Exported) -> None:
    flat = exported.images.reshape(len(exported.images), -1).astype(np.float64)  # any numbers, each image flattened
    answer = classifier.predict(None, {"pixels": flat})
    probabilities = np.array([[row[name] for name in CLASS_NAMES] for row in answer["probabilities"]])
    assert np.allclose(probabilities, exported.expected, atol=1e-5)
    assert list(answer["class"]) == [CLASS_NAMES[index] for index in exported.expected.argmax(axis=1)]
    assert np.allclose(answer["score"], exported.expected.max(axis=1), atol=1e-5) and set(answer["error"]) == {""}


def test_image_bytes_or_base64_text_give_the_same_answer_and_a_bad_item_its_error(
        classifier: SavedModelClassifier, exported: Exported) -> None:
    encoded = [png(image) for image in exported.images]  # the images hold whole pixel values: PNG keeps them
    as_bytes = classifier.predict(None, pd.DataFrame({"image": encoded}))
    as_text = classifier.predict(None, pd.DataFrame({"image": [base64.b64encode(item).decode() for item in encoded]}))
    pixels = classifier.predict(None, {"pixels": exported.images.reshape(len(exported.images), -1)})
    assert list(as_bytes["class"]) == list(as_text["class"]) == list(pixels["class"])
    assert np.allclose(as_bytes["score"], pixels["score"], atol=1e-5)
    bad = classifier.predict(None, pd.DataFrame({"image": [encoded[0], b"", "not base64!"]}))
    assert list(bad["error"]) == ["", "empty: no image bytes", "not an image: neither JPEG, PNG, GIF nor BMP"]
    assert list(bad["class"]) == [as_bytes["class"][0], "", ""] and list(bad["score"])[1:] == [0.0, 0.0]


def test_an_input_without_either_column_is_one_clear_error(classifier: SavedModelClassifier) -> None:
    with pytest.raises(ValueError, match="the input needs a column 'image' .* or 'pixels'"):
        classifier.predict(None, pd.DataFrame({"images": [b"x"]}))
