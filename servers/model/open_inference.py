"""The Open Inference Protocol (KServe's v2), which Triton, MLServer and KServe speak: the server's and the model's
readiness and metadata, and `infer`, its tensors as JSON data or in the binary tensor data extension (what Triton's
clients send BYTES in: a JSON header of `Inference-Header-Content-Length` bytes, then each input's bytes, each BYTES
element prefixed by its length as 4 bytes, little-endian).

An image model takes one input: BYTES (one encoded image an element) or FP32 [N, height, width, channels] (pixels
0..255), and answers `classes` (BYTES [N]) and `scores` (FP32 [N, classes]); a tensor model takes FP32
[N, *features] and answers each output of its signature (FP32)."""
from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from servers.model.protocol import Inputs, Refused, counted, finite, float_images
from servers.model.served_model import Answer, ServedModel, TensorAnswer

HEADER_LENGTH = "inference-header-content-length"
IMAGE_INPUTS = {"BYTES": "images_bytes", "FP32": "images"}  # an image model's inputs, by datatype


def split_body(body: bytes, header_length: str | None) -> tuple[Any, bytes]:
    """A request's JSON header and the binary data after it (none without Inference-Header-Content-Length)."""
    length = len(body) if header_length is None else int(header_length) if header_length.isdigit() else -1
    if not 0 <= length <= len(body):
        raise Refused(400, f"{HEADER_LENGTH} {header_length!r}: not a length within the body's {len(body)} bytes")
    try:
        return json.loads(body[:length]), body[length:]
    except (ValueError, RecursionError):
        raise Refused(400, "the request's header is not JSON this server reads") from None


def byte_elements(raw: bytes, where: str) -> list[bytes]:
    """The elements of a BYTES tensor's binary data: each its length (4 bytes, little-endian), then its bytes."""
    elements, offset = [], 0
    while offset < len(raw):
        size = struct.unpack_from("<I", raw, offset)[0] if offset + 4 <= len(raw) else len(raw)
        if offset + 4 + size > len(raw):
            raise Refused(400, f"{where}: its binary data ends inside an element")
        elements.append(raw[offset + 4:offset + 4 + size])
        offset += 4 + size
    return elements


def one_input(document: Any, binary: bytes) -> tuple[dict[str, Any], bytes | None]:
    """The request's one input and its binary data (None when its data is JSON)."""
    inputs = document.get("inputs") if isinstance(document, dict) else None
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise Refused(400, "the body is {\"inputs\": [one input]}: this model takes one tensor")
    tensor = inputs[0]
    if not isinstance(tensor.get("shape"), list) or not all(isinstance(size, int) and size >= 0
                                                             for size in tensor["shape"]) or not tensor["shape"]:
        raise Refused(400, f"input {str(tensor.get('name'))[:80]!r}: shape must be a list of sizes, the batch first")
    size = (tensor.get("parameters") or {}).get("binary_data_size")
    if size is None:
        return tensor, None
    if not isinstance(size, int) or not 0 <= size <= len(binary):
        raise Refused(400, f"binary_data_size {str(size)[:40]}: not within the {len(binary)} bytes after the header")
    return tensor, binary[:size]


def float_values(tensor: dict[str, Any], raw: bytes | None) -> np.ndarray:
    """An FP32 input's values in its shape."""
    shape = tensor["shape"]
    try:
        values = np.frombuffer(raw, "<f4") if raw is not None else np.asarray(tensor.get("data"), np.float32)
        return finite(values.reshape(shape).astype(np.float32), "input")
    except (TypeError, ValueError):
        raise Refused(400, f"input: FP32 data of {int(np.prod(shape))} numbers for shape {shape}") from None


def infer_inputs(document: Any, binary: bytes, model: ServedModel, max_instances: int) -> Inputs:
    """The model's inputs of an infer request."""
    tensor, raw = one_input(document, binary)
    datatype, batch = tensor.get("datatype"), tensor["shape"][0]
    counted(batch, max_instances)
    if datatype == "FP32":
        values = float_values(tensor, raw)
        if model.tensor:
            if values.shape[1:] != model.image_shape:
                raise Refused(400, f"input: shape {list(values.shape[1:])} per instance; the model takes "
                                   f"{list(model.image_shape)}")
            return Inputs(None, None, features=values)
        return Inputs(None, float_images(values, model.image_shape, "input"))
    if datatype != "BYTES" or model.tensor:
        raise Refused(400, f"input datatype {str(datatype)[:20]}: this model takes "
                           f"{'FP32' if model.tensor else 'BYTES (encoded images) or FP32 (pixels)'}")
    if raw is None:
        raise Refused(400, "input: BYTES of images are sent as binary data (binary_data_size), not JSON strings")
    images = byte_elements(raw, "input")
    if len(images) != batch or len(tensor["shape"]) != 1:
        raise Refused(400, f"input: shape {tensor['shape']} but {len(images)} images in its data")
    return Inputs(images, None)


def output(name: str, datatype: str, values: np.ndarray) -> dict[str, Any]:
    data = [str(value) for value in values.ravel()] if datatype == "BYTES" else values.ravel().tolist()
    return {"name": name, "datatype": datatype, "shape": list(values.shape), "data": data}


def infer_answer(result: Answer | TensorAnswer, model: ServedModel, request_id: Any) -> dict[str, Any]:
    """The infer response: the image model's classes and scores (Refused, 400, naming the first image that could
    not be used), or the tensor model's outputs."""
    if isinstance(result, TensorAnswer):
        outputs = [output(name, "FP32", values.astype(np.float32)) for name, values in result.outputs.items()]
    else:
        for index, error in enumerate(result.errors):
            if error:
                raise Refused(400, f"input element {index}: {error}")
        outputs = [output("classes", "BYTES", result.classes), output("scores", "FP32", result.scores)]
    answer = {"model_name": model.name, "model_version": model.version, "outputs": outputs}
    return answer | ({"id": str(request_id)} if request_id is not None else {})


def model_metadata(model: ServedModel, versions: list[str]) -> dict[str, Any]:
    """GET /v2/models/NAME: the versions served, the inputs `model` takes, the outputs it answers."""
    shape = list(model.image_shape)
    if model.tensor:
        outputs = model.signatures.get("serving_default", {}).get("outputs", {})
        inputs = [{"name": "x", "datatype": "FP32", "shape": [-1, *shape]}]
        answers = [{"name": name, "datatype": "FP32", "shape": [int(dim["size"]) for dim in
                                                                spec.get("tensor_shape", {}).get("dim", [])]}
                   for name, spec in sorted(outputs.items())]
    else:
        inputs = [{"name": IMAGE_INPUTS["BYTES"], "datatype": "BYTES", "shape": [-1]},
                  {"name": IMAGE_INPUTS["FP32"], "datatype": "FP32", "shape": [-1, *shape]}]
        answers = [{"name": "classes", "datatype": "BYTES", "shape": [-1]},
                   {"name": "scores", "datatype": "FP32", "shape": [-1, len(model.class_names)]}]
    return {"name": model.name, "versions": versions, "platform": "tensorflow_savedmodel",
            "inputs": inputs, "outputs": answers}
