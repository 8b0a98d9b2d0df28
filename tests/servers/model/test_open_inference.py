"""The Open Inference Protocol's request reading, without a server: the binary tensor data extension's header and
BYTES elements, and what a hostile or mistaken request gets (one line, 400 or 413, before any model runs)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from servers.model.open_inference import byte_elements, infer_inputs, split_body
from servers.model.protocol import Refused
from servers.model.served_model import ServedModel


def image_model() -> ServedModel:
    return ServedModel("ringflow", "3", [str(digit) for digit in range(10)], (8, 8, 1), None, None, 0.0)


def binary_request(images: list[bytes], shape: list[int] | None = None) -> tuple[bytes, str]:
    """A body as tritonclient sends BYTES: the JSON header, then each element's length and bytes; its header length."""
    data = b"".join(struct.pack("<I", len(image)) + image for image in images)
    header = json.dumps({"inputs": [{"name": "images_bytes", "shape": shape or [len(images)], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    return header + data, str(len(header))


def test_bytes_elements_in_binary_data_are_the_encoded_images() -> None:
    body, length = binary_request([b"\x89PNG one", b"", b"jpeg two"])
    document, binary = split_body(body, length)
    inputs = infer_inputs(document, binary, image_model(), 16)
    assert inputs.encoded == [b"\x89PNG one", b"", b"jpeg two"]


def test_fp32_pixels_in_json_are_float_images() -> None:
    document = {"inputs": [{"name": "images", "shape": [2, 8, 8, 1], "datatype": "FP32",
                            "data": list(range(128))}]}
    pixels = infer_inputs(document, b"", image_model(), 16).pixels
    assert pixels is not None and pixels.shape == (2, 8, 8, 1) and pixels.dtype == np.float32


@pytest.mark.parametrize("body, length, status, said", [
    (b'{"inputs": []}', "99", 400, "not a length within the body's 14 bytes"),
    (b"not json", None, 400, "header is not JSON"),
    (binary_request([b"abc"])[0][:-1], binary_request([b"abc"])[1], 400, "binary_data_size 7: not within the 6"),
    (binary_request([b"a"] * 17)[0], binary_request([b"a"] * 17)[1], 413, "over serving.max_instances (16)"),
    (binary_request([b"a", b"b"], [3])[0], binary_request([b"a", b"b"], [3])[1], 400, "shape [3] but 2 images"),
    (b'{"inputs": [{"name": "images", "shape": [1, 8, 8, 1], "datatype": "FP32", "data": [1, 2]}]}', None, 400,
     "FP32 data of 64 numbers for shape [1, 8, 8, 1]"),
    (b'{"inputs": [{"name": "images_bytes", "shape": [1], "datatype": "BYTES", "data": ["x"]}]}', None, 400,
     "sent as binary data"),
    (b'{"inputs": [{"name": "a", "shape": [1], "datatype": "INT64", "data": [1]}]}', None, 400, "datatype INT64"),
])
def test_a_bad_request_is_refused_in_one_line(body: bytes, length: str | None, status: int, said: str) -> None:
    with pytest.raises(Refused) as refused:
        document, binary = split_body(body, length)
        infer_inputs(document, binary, image_model(), 16)
    assert refused.value.status == status and said in str(refused.value), str(refused.value)


def test_an_element_whose_length_runs_past_the_data_is_refused() -> None:
    with pytest.raises(Refused, match="ends inside an element"):
        byte_elements(struct.pack("<I", 100) + b"short", "input")
