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

from tasks.serving.served_model import Answer
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

    @property
    def count(self) -> int:
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


def counted(count: int, max_instances: int) -> None:
    """Refuse a request of more images than serving.max_instances."""
    if count > max_instances:
        raise Refused(413, f"{count} images in one request: over serving.max_instances ({max_instances})")


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
    return images


def tf_serving_answer(answer: Answer, rows: bool) -> dict[str, Any]:
    """TensorFlow Serving's predict response: each signature output per image (`predictions`) or per output."""
    outputs = {"classes": answer.classes.tolist(), "scores": answer.scores.tolist(), "top_k": answer.top_k.tolist(),
               "errors": answer.errors}
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
