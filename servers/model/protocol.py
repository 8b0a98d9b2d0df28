"""The two request and answer formats the server speaks, read into images and written from a model's answer:
TensorFlow Serving's REST predict API (`instances` or `inputs`, binary values as `{"b64": ...}`) and MLflow's
scoring protocol (`dataframe_split`, `dataframe_records`, `instances` or `inputs`, images as base64 text in the
column `image`, or float images in the column `pixels`). Anything else is a Refused request, in one line."""
from __future__ import annotations

import base64
import binascii
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from servers.model.served_model import Answer, TensorAnswer
from trainer.serving_bytes import BYTES_SIGNATURE

with warnings.catch_warnings(record=True):  # MLflow's hint to model authors when the pyfunc model's class is made
    # (it sets its own filter around it: this takes the warning whatever the filters say)
    from tasks.outputs.serving_model import IMAGE, PIXELS, answer_columns, as_bytes

FLOAT_SIGNATURE = "serving_default"


class Refused(ValueError):
    """A request the server will not answer: its HTTP status and one line saying why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Inputs:
    """A request's images: encoded (the bytes signature) or float pixels (the float signature); `rows`: whether
    its answer is one object per image (TensorFlow Serving's `instances`) or one list per output (`inputs`)."""
    encoded: list[bytes] | None
    pixels: np.ndarray | None
    rows: bool = True
    features: np.ndarray | None = None  # a tensor model's instances, float32 [N, *feature_shape]

    @property
    def count(self) -> int:
        if self.features is not None:
            return len(self.features)
        return len(self.encoded) if self.encoded is not None else len(self.pixels if self.pixels is not None else [])


def decoded_b64(value: Any, where: str) -> bytes:
    """An image of a TensorFlow Serving request: `{"b64": "..."}` (or the input by its name holding one)."""
    if isinstance(value, dict) and len(value) == 1 and "b64" not in value:
        value = next(iter(value.values()))  # {"images_bytes": {"b64": ...}}: the signature's one input by name
    if not isinstance(value, dict) or not isinstance(value.get("b64"), str):
        raise Refused(400, f"{where}: an image is sent as {{\"b64\": \"<base64 of its JPEG or PNG bytes>\"}}")
    try:
        return base64.b64decode(value["b64"], validate=True)
    except (binascii.Error, ValueError):
        raise Refused(400, f"{where}: its b64 value is not base64") from None


def tf_serving_inputs(document: Any, max_instances: int, image_shape: tuple[int, ...]) -> Inputs:
    """The images of a TensorFlow Serving predict request (row format `instances`, columnar `inputs`)."""
    if not isinstance(document, dict) or ("instances" in document) == ("inputs" in document):
        raise Refused(400, "the body is a JSON object with \"instances\" (or \"inputs\"): a list of images")
    rows = "instances" in document
    items = document["instances" if rows else "inputs"]
    if isinstance(items, dict) and len(items) == 1:
        items = next(iter(items.values()))  # {"inputs": {"images_bytes": [...]}}
    if not isinstance(items, list) or not items:
        raise Refused(400, f"\"{'instances' if rows else 'inputs'}\" must be a non-empty list of images")
    counted(len(items), max_instances)
    signature = document.get("signature_name", BYTES_SIGNATURE)
    if signature == FLOAT_SIGNATURE:
        return Inputs(None, float_images(items, image_shape, "instances"), rows)
    if signature != BYTES_SIGNATURE:
        raise Refused(400, f"no signature {signature!r}: {BYTES_SIGNATURE} (encoded images, the default) or "
                           f"{FLOAT_SIGNATURE} (float images)")
    return Inputs([decoded_b64(item, f"instance {index}") for index, item in enumerate(items)], None, rows)


def counted(count: int, max_instances: int, what: str = "images") -> None:
    """Refuse a request of more images (instances) than serving.max_instances."""
    if count > max_instances:
        raise Refused(413, f"{count} {what} in one request: over serving.max_instances ({max_instances})")


TENSOR_INPUT = "x"  # a tensor model's one input


def unnamed(value: Any, where: str) -> Any:
    """An instance (or the columns) as sent, or the value of the model's one input by its name {"x": ...}."""
    if isinstance(value, dict):
        if list(value) != [TENSOR_INPUT]:
            raise Refused(400, f"{where}: the model's one input is {TENSOR_INPUT!r} (got {sorted(value)[:3]})")
        return value[TENSOR_INPUT]
    return value


def finite(values: np.ndarray, where: str) -> np.ndarray:
    """float32 values, refused when one is NaN or infinite (JSON's NaN and Infinity, or beyond float32's range)."""
    if not np.isfinite(values).all():
        raise Refused(400, f"{where}: every value must be a finite number (NaN, Infinity or one beyond float32 given)")
    return values


def json_numbers(values: np.ndarray) -> list[Any]:
    """An output's values as JSON numbers: a NaN or an infinity a model gave, as null (JSON has none of them)."""
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return values.tolist()
    kept = values.astype(object)
    kept[~np.isfinite(values)] = None
    return kept.tolist()


def tensor_features(items: Any, feature_shape: tuple[int, ...], where: str) -> np.ndarray:
    """float32 features [N, *feature_shape] of instances given as nested lists of numbers (or flattened rows)."""
    try:
        numbers = np.asarray(items)
    except (TypeError, ValueError, RecursionError):
        raise Refused(400, f"{where}: instances must be lists of numbers, all of one shape") from None
    if numbers.dtype.kind not in "iuf":
        raise Refused(400, f"{where}: instances must be lists of numbers, all of one shape (not "
                           f"{'text' if numbers.dtype.kind in 'US' else 'other values'})")
    size = int(np.prod(feature_shape))
    if numbers.ndim >= 1 and numbers.shape[1:] != feature_shape and int(np.prod(numbers.shape[1:])) == size \
            and numbers.ndim <= 2:
        numbers = numbers.reshape(len(numbers), *feature_shape)  # flattened rows, or scalars of one feature
    if numbers.ndim < 1 or numbers.shape[1:] != feature_shape:
        raise Refused(400, f"{where}: instances of shape {list(numbers.shape[1:])}; the model takes "
                           f"{list(feature_shape)} (float32 {TENSOR_INPUT!r})")
    with np.errstate(over="ignore"):  # a number beyond float32 becomes an infinity, refused just below
        return finite(numbers.astype(np.float32), where)


def tensor_inputs(document: Any, max_instances: int, feature_shape: tuple[int, ...]) -> Inputs:
    """A tensor model's instances of a TensorFlow Serving predict request: row format `instances` (each a nested
    list of numbers, or {"x": ...}) or columnar `inputs` (the batch, or {"x": batch})."""
    if not isinstance(document, dict) or ("instances" in document) == ("inputs" in document):
        raise Refused(400, "the body is a JSON object with \"instances\" (or \"inputs\"): lists of numbers")
    if document.get("signature_name", FLOAT_SIGNATURE) != FLOAT_SIGNATURE:
        raise Refused(400, f"no signature {document['signature_name']!r}: {FLOAT_SIGNATURE} (the model's one)")
    rows = "instances" in document
    key = "instances" if rows else "inputs"
    items = document[key]
    items = [unnamed(item, f"instance {index}") for index, item in enumerate(items)] \
        if rows and isinstance(items, list) else unnamed(items, key)
    if not isinstance(items, list) or not items:
        raise Refused(400, f"\"{key}\" must be a non-empty list of instances (lists of numbers)")
    counted(len(items), max_instances, "instances")
    return Inputs(None, None, rows, tensor_features(items, feature_shape, key))


def tensor_answer(answer: TensorAnswer, rows: bool) -> dict[str, Any]:
    """TensorFlow Serving's predict response of a tensor model: one named output (a regressor's "predictions"):
    its values, per instance (`predictions`) or whole (`outputs`); several: an object per instance, or per output."""
    outputs = {name: json_numbers(values) for name, values in answer.outputs.items()}
    if len(outputs) == 1:
        (values,) = outputs.values()
        return {"predictions": values} if rows else {"outputs": values}
    if not rows:
        return {"outputs": outputs}
    return {"predictions": [dict(zip(outputs, values)) for values in zip(*outputs.values())]}


def mlflow_tensor_inputs(document: Any, max_instances: int, feature_shape: tuple[int, ...]) -> Inputs:
    """A tensor model's instances of an MLflow scoring request with its tensor signature: `inputs` or `instances`
    (as TensorFlow Serving's), or `dataframe_split` whose rows are the features (flattened)."""
    if isinstance(document, dict) and isinstance(split := document.get("dataframe_split"), dict):
        data = split.get("data")
        if not isinstance(data, list) or not data:
            raise Refused(400, "dataframe_split needs data: a non-empty list of rows of numbers")
        counted(len(data), max_instances, "instances")
        rows = [row[0] if isinstance(row, list) and len(row) == 1 and isinstance(row[0], list) else row
                for row in data]
        return Inputs(None, None, True, tensor_features(rows, feature_shape, "dataframe_split"))
    return tensor_inputs(document, max_instances, feature_shape)


def mlflow_tensor_answer(answer: TensorAnswer, class_names: list[str]) -> dict[str, Any]:
    """MLflow's scoring response of a tensor model: a regressor's predictions [N, k]; a classifier's rows as an
    image classifier's (class, score, probabilities, error)."""
    if "probabilities" not in answer.outputs:
        return {"predictions": json_numbers(answer.outputs["predictions"])}
    scores = answer.outputs["probabilities"]
    columns = answer_columns(scores, [""] * len(scores), class_names)
    return {"predictions": [dict(zip(columns, values)) for values in zip(*columns.values())]}


def float_images(items: Any, image_shape: tuple[int, ...], where: str) -> np.ndarray:
    """Float images (0..255) of the model's input shape, as nested lists or flattened rows."""
    try:
        images = np.asarray(items, np.float32)
    except (TypeError, ValueError):
        raise Refused(400, f"{where}: float images must be lists of numbers, all of one shape") from None
    if images.ndim == 2 and images.shape[1] == np.prod(image_shape):
        images = images.reshape(len(images), *image_shape)  # flattened rows (MLflow's pixels column)
    if images.shape[1:] != image_shape:
        raise Refused(400, f"{where}: float images of shape {list(images.shape[1:])}; the model takes "
                           f"{list(image_shape)} (height, width, channels) or flattened rows")
    return finite(images, where)


def tf_serving_answer(answer: Answer, rows: bool) -> dict[str, Any]:
    """TensorFlow Serving's predict response: each signature output per image (`predictions`) or per output."""
    outputs = {"classes": answer.classes.tolist(), "scores": json_numbers(answer.scores),
               "top_k": answer.top_k.tolist(), "errors": answer.errors}
    if not rows:
        return {"outputs": outputs}
    return {"predictions": [dict(zip(outputs, values)) for values in zip(*outputs.values())]}


def mlflow_columns(document: Any) -> dict[str, list[Any]]:
    """The columns of an MLflow scoring request, by name."""
    if not isinstance(document, dict):
        raise Refused(400, "the body is a JSON object with dataframe_split, dataframe_records, instances or inputs")
    if isinstance(split := document.get("dataframe_split"), dict):
        names, data = split.get("columns"), split.get("data")
        if not isinstance(names, list) or not isinstance(data, list) or \
                not all(isinstance(row, list) and len(row) == len(names) for row in data):
            raise Refused(400, "dataframe_split needs columns and data (a list of rows of that many values)")
        return {str(name): [row[index] for row in data] for index, name in enumerate(names)}
    records = document.get("dataframe_records", document.get("instances"))
    if isinstance(records, list) and all(isinstance(record, dict) for record in records):
        names = sorted({name for record in records for name in record})
        return {name: [record.get(name) for record in records] for name in names}
    if isinstance(inputs := document.get("inputs"), dict) and all(isinstance(v, list) for v in inputs.values()):
        return {str(name): values for name, values in inputs.items()}
    raise Refused(400, "the body needs dataframe_split, dataframe_records, instances (a list of objects) or inputs "
                       f"(an object of columns), with the column {IMAGE!r} or {PIXELS!r}")


def mlflow_inputs(document: Any, max_instances: int, image_shape: tuple[int, ...]) -> Inputs:
    """The images of an MLflow scoring request: the column `image` (base64 text) or `pixels` (float images)."""
    columns = mlflow_columns(document)
    if IMAGE in columns:
        counted(len(columns[IMAGE]), max_instances)
        return Inputs([mlflow_image(item, index) for index, item in enumerate(columns[IMAGE])], None)
    if PIXELS in columns:
        counted(len(columns[PIXELS]), max_instances)
        return Inputs(None, float_images(columns[PIXELS], image_shape, PIXELS))
    raise Refused(400, f"the input needs a column {IMAGE!r} (images as base64 text) or {PIXELS!r} (float images)")


def mlflow_image(item: Any, index: int) -> bytes:
    """An image of the column `image`: base64 text, as MLflow sends a binary column (not base64: not an image)."""
    if not isinstance(item, str):
        raise Refused(400, f"row {index}: the column {IMAGE!r} holds images as base64 text")
    return as_bytes(item)  # text that is not base64: the bytes signature says of it "not an image"


def mlflow_answer(answer: Answer, class_names: list[str]) -> dict[str, Any]:
    """MLflow's scoring response: the pyfunc model's rows (class, score, probabilities, error) as records."""
    columns = answer_columns(answer.scores, answer.errors, class_names)
    return {"predictions": [dict(zip(columns, values)) for values in zip(*columns.values())]}
