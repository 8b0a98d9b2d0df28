"""The server's two request formats read into images, and its answers written, as TensorFlow Serving's and MLflow's
clients expect them; a request it will not answer is refused with its status and one line saying why."""
from __future__ import annotations

import base64

import numpy as np
import pytest

from servers.model.protocol import Refused, mlflow_answer, mlflow_inputs, tf_serving_answer, tf_serving_inputs
from servers.model.served_model import Answer

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


def test_a_tensor_model_s_instances_and_inputs_of_numbers() -> None:
    from servers.model.protocol import tensor_inputs
    rows = [[1, 2, 3], [4.5, 5, 6]]
    for document in ({"instances": rows}, {"instances": [{"x": rows[0]}, rows[1]]}, {"inputs": rows},
                     {"inputs": {"x": rows}}, {"signature_name": "serving_default", "instances": rows}):
        inputs = tensor_inputs(document, 8, (3,))
        assert inputs.features is not None and inputs.features.dtype == np.float32, document
        assert inputs.features.tolist() == [[1, 2, 3], [4.5, 5, 6]] and inputs.rows == ("instances" in document)
    assert tensor_inputs({"instances": [1.0, 2.0]}, 8, (1,)).features.shape == (2, 1)  # scalars of one feature
    assert tensor_inputs({"instances": [list(range(4))]}, 8, (2, 2)).features.shape == (1, 2, 2)  # flattened


@pytest.mark.parametrize(("document", "status", "said"), [
    ({"instances": [[1, 2]]}, 400, "instances: instances of shape [2]; the model takes [3] (float32 'x')"),
    ({"instances": [[1, 2, 3], [1, 2]]}, 400, "instances must be lists of numbers, all of one shape"),
    ({"instances": [[1, "a", 3]]}, 400, "instances must be lists of numbers, all of one shape (not text)"),
    ({"instances": [[1, None, 3]]}, 400, "all of one shape (not other values)"),
    ({"instances": [[[[1, 2, 3]]]]}, 400, "instances of shape [1, 1, 3]"),
    ({"instances": [{"y": [1, 2, 3]}]}, 400, "instance 0: the model's one input is 'x'"),
    ({"instances": [[1, 2, 3]] * 9}, 413, "9 instances in one request: over serving.max_instances (8)"),
    ({"signature_name": "serving_bytes", "instances": [[1, 2, 3]]}, 400, "no signature 'serving_bytes'"),
    ({"inputs": []}, 400, "non-empty list of instances"),
    ({"instances": [[1, float("nan"), 3]]}, 400, "every value must be a finite number"),
    ({"inputs": [[1, 2, 1e39]]}, 400, "every value must be a finite number"),  # beyond float32: an infinity
])
def test_a_tensor_request_it_cannot_answer_is_one_line(document: object, status: int, said: str) -> None:
    from servers.model.protocol import tensor_inputs
    with pytest.raises(Refused) as refused:
        tensor_inputs(document, 8, (3,))
    assert refused.value.status == status and said in str(refused.value) and "\n" not in str(refused.value)


def test_a_tensor_model_s_answers_as_tensorflow_serving_and_mlflow_give_them() -> None:
    from servers.model.protocol import mlflow_tensor_answer, mlflow_tensor_inputs, tensor_answer
    from servers.model.served_model import TensorAnswer
    regressor = TensorAnswer({"predictions": np.array([[0.5, 1.0], [2.0, 3.0]])})
    assert tensor_answer(regressor, rows=True) == {"predictions": [[0.5, 1.0], [2.0, 3.0]]}
    assert tensor_answer(regressor, rows=False) == {"outputs": [[0.5, 1.0], [2.0, 3.0]]}
    assert mlflow_tensor_answer(regressor, []) == {"predictions": [[0.5, 1.0], [2.0, 3.0]]}
    probabilities = np.array([[0.25, 0.75]])
    classifier = TensorAnswer({"classes": np.array([1]), "predictions": probabilities, "probabilities": probabilities})
    assert tensor_answer(classifier, rows=True)["predictions"] == [
        {"classes": 1, "predictions": [0.25, 0.75], "probabilities": [0.25, 0.75]}]
    assert mlflow_tensor_answer(classifier, ["a", "b"])["predictions"] == [
        {"class": "b", "score": 0.75, "probabilities": {"a": 0.25, "b": 0.75}, "error": ""}]
    split = mlflow_tensor_inputs({"dataframe_split": {"columns": ["u", "v", "w"], "data": [[1, 2, 3]]}}, 8, (3,))
    assert split.features is not None and split.features.tolist() == [[1, 2, 3]]
    assert mlflow_tensor_inputs({"inputs": [[1, 2, 3]]}, 8, (3,)).features.shape == (1, 3)


def test_a_model_s_nan_or_infinity_is_answered_as_null_json_having_neither() -> None:
    from servers.model.protocol import json_numbers
    assert json_numbers(np.array([[0.5, np.nan], [np.inf, -np.inf]], np.float32)) == [[0.5, None], [None, None]]
    assert json_numbers(np.array([1.5, 2.0], np.float32)) == [1.5, 2.0]
