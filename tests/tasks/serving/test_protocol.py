"""The server's two request formats read into images, and its answers written, as TensorFlow Serving's and MLflow's
clients expect them; a request it will not answer is refused with its status and one line saying why."""
from __future__ import annotations

import base64

import numpy as np
import pytest

from tasks.serving.protocol import Refused, mlflow_answer, mlflow_inputs, tf_serving_answer, tf_serving_inputs
from tasks.serving.served_model import Answer

SHAPE = (8, 8, 1)
PNG = b"\x89PNG\r\n\x1a\nrest"
B64 = base64.b64encode(PNG).decode()


def test_tensorflow_serving_rows_and_columns_of_b64_images() -> None:
    assert tf_serving_inputs({"instances": [{"b64": B64}, {"images_bytes": {"b64": B64}}]}, 8, SHAPE).encoded == \
        [PNG, PNG]
    columns = tf_serving_inputs({"inputs": {"images_bytes": [{"b64": B64}]}}, 8, SHAPE)
    assert columns.encoded == [PNG] and not columns.rows


def test_tensorflow_serving_float_images_through_the_default_signature() -> None:
    inputs = tf_serving_inputs({"signature_name": "serving_default", "instances": np.zeros((2, *SHAPE)).tolist()},
                               8, SHAPE)
    assert inputs.encoded is None and inputs.pixels is not None and inputs.pixels.shape == (2, *SHAPE)


@pytest.mark.parametrize(("document", "status", "said"), [
    ({"instances": ["text"]}, 400, "instance 0: an image is sent as"),
    ({"instances": [{"b64": "not base64!"}]}, 400, "its b64 value is not base64"),
    ({"instances": []}, 400, "non-empty list"),
    ({"inputs": [], "instances": []}, 400, "\"instances\" (or \"inputs\")"),
    ({"instances": [{"b64": B64}] * 9}, 413, "9 images in one request: over serving.max_instances (8)"),
    ({"signature_name": "other", "instances": [{"b64": B64}]}, 400, "no signature 'other'"),
    ({"signature_name": "serving_default", "instances": [[1, 2]]}, 400, "the model takes [8, 8, 1]"),
])
def test_a_tensorflow_serving_request_it_cannot_answer_is_refused(document: object, status: int, said: str) -> None:
    with pytest.raises(Refused) as refused:
        tf_serving_inputs(document, 8, SHAPE)
    assert refused.value.status == status and said in str(refused.value)


def test_mlflow_requests_in_each_of_its_forms() -> None:
    for document in ({"dataframe_split": {"columns": ["image"], "data": [[B64]]}},
                     {"dataframe_records": [{"image": B64}]}, {"instances": [{"image": B64}]},
                     {"inputs": {"image": [B64]}}):
        assert mlflow_inputs(document, 8, SHAPE).encoded == [PNG], document
    assert mlflow_inputs({"inputs": {"image": ["plain text"]}}, 8, SHAPE).encoded == [b"plain text"]
    pixels = mlflow_inputs({"dataframe_split": {"columns": ["pixels"], "data": [[[0.0] * 64]]}}, 8, SHAPE).pixels
    assert pixels is not None and pixels.shape == (1, *SHAPE)
    with pytest.raises(Refused, match="a column 'image'"):
        mlflow_inputs({"inputs": {"other": [1]}}, 8, SHAPE)
    with pytest.raises(Refused, match="over serving.max_instances"):
        mlflow_inputs({"dataframe_records": [{"image": B64}] * 9}, 8, SHAPE)


def test_answers_name_the_classes_and_say_each_error() -> None:
    answer = Answer(np.array(["seven", ""]), np.array([[0.25, 0.75], [0.0, 0.0]]), np.array([[1, 0], [-1, -1]]),
                    ["", "empty: no image bytes"])
    assert tf_serving_answer(answer, rows=True)["predictions"][0] == {
        "classes": "seven", "scores": [0.25, 0.75], "top_k": [1, 0], "errors": ""}
    assert tf_serving_answer(answer, rows=False)["outputs"]["errors"] == ["", "empty: no image bytes"]
    records = mlflow_answer(answer, ["three", "seven"])["predictions"]
    assert records[0] == {"class": "seven", "score": 0.75, "probabilities": {"three": 0.25, "seven": 0.75},
                          "error": ""}
    assert records[1]["class"] == "" and records[1]["error"] == "empty: no image bytes"
