"""TFRecord files and tf.train.Example records written without TensorFlow (for conversion worker processes).

The Example is encoded in protobuf's wire format for ringflow's fixed image and tensor schemas; the tests check that
TensorFlow parses it to the same values. TFRecord framing: length, masked crc32c(length), data, masked crc32c(data).
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
from pathlib import Path
from types import TracebackType

import google_crc32c
import numpy as np

_MASK_DELTA = 0xA282EAD8


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _bytes_feature(value: bytes) -> bytes:
    return _field(1, _field(1, value))  # Feature.bytes_list { value }


def _int64_feature(value: int) -> bytes:
    return _field(3, _field(1, _varint(value)))  # Feature.int64_list { packed value }


def _entry(key: bytes, feature: bytes) -> bytes:
    """One `feature` map entry of Features, as a field of Features."""
    return _field(1, _field(1, key) + _field(2, feature))


@functools.lru_cache(maxsize=4096)
def _int_entry(key: bytes, value: int) -> bytes:
    return _entry(key, _int64_feature(value))


@functools.lru_cache(maxsize=16)
def _format_entry(image_format: str) -> bytes:
    return _entry(b"image/format", _bytes_feature(image_format.encode()))


_ENCODED_KEY = _field(1, b"image/encoded")


def encode_example(encoded: bytes, image_format: str, label: int, shape: tuple[int, int, int]) -> bytes:
    """Serialized tf.train.Example: image/encoded, image/format, image/class/label, image/height|width|channels.

    Everything but the image bytes is a few cached pieces, so this costs little more than one copy.
    """
    height, width, channels = (int(v) for v in shape)
    if min(label, height, width, channels) < 0:
        raise ValueError(f"negative label or shape: {label}, {shape}")
    feature = _field(1, _field(1, encoded))
    image_entry = _field(1, _ENCODED_KEY + _varint(2 << 3 | 2) + _varint(len(feature)) + feature)
    entries = b"".join((image_entry, _format_entry(image_format), _int_entry(b"image/class/label", int(label)),
                        _int_entry(b"image/height", height), _int_entry(b"image/width", width),
                        _int_entry(b"image/channels", channels)))
    return _field(1, entries)  # Example.features { feature: map entries }


_X_KEY, _Y_KEY = _field(1, b"x"), _field(1, b"y")


def _float_entry(key_field: bytes, values: np.ndarray) -> bytes:
    """A map entry whose Feature is a float_list of packed little-endian float32 values."""
    packed = _field(1, np.ascontiguousarray(values, dtype="<f4").tobytes())  # FloatList { packed value }
    return _field(1, key_field + _field(2, _field(2, packed)))  # Feature.float_list


def encode_tensor_example(features: np.ndarray, targets: np.ndarray) -> bytes:
    """Serialized tf.train.Example of tensor data: "x", the features flattened row-major, and "y", the targets
    (a class id as a float for classification), both FloatLists of float32."""
    entries = _float_entry(_X_KEY, features.reshape(-1)) + _float_entry(_Y_KEY, targets.reshape(-1))
    return _field(1, entries)  # Example.features { feature: map entries }


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


class TFRecordFile:
    """Writes records to `<path>.tmp` and renames it to `path` on a clean close: a shard appears only whole."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._file = open(self._tmp, "wb")
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.count = 0

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        framed = length + _masked_crc(length) + record + _masked_crc(record)
        self._file.write(framed)
        self.sha256.update(framed)
        self.bytes += len(framed)
        self.count += 1

    def __enter__(self) -> "TFRecordFile":
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._file.close()
        if kind is None:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)
