"""The summary features of one model input, computed by one function for both sides of a drift comparison: the
model server's prediction log (each served item) and the reference the training keeps (the test split's items).
An image: its height, width, channels and the mean and spread of its brightness (0..255, PIL's luma for encoded
images, the channels' mean for pixels); a tensor: the mean, spread, minimum and maximum of its values (and the values
themselves, when there are at most TENSOR_VALUES)."""
from __future__ import annotations

import io
from typing import Any

import numpy as np

TENSOR_VALUES = 64  # a tensor instance of more values is logged as its summary


def image_summary(given: bytes | np.ndarray) -> dict[str, Any]:
    """An image's width, height, channels and the mean and spread of its brightness (0..255)."""
    if isinstance(given, bytes):
        from PIL import Image
        with Image.open(io.BytesIO(given)) as image:
            bands = len(image.getbands())
            brightness = np.asarray(image.convert("L"), np.float32)
    else:
        bands, brightness = given.shape[-1], given.astype(np.float32).mean(axis=-1)
    return {"kind": "image", "height": brightness.shape[0], "width": brightness.shape[1], "channels": bands,
            "mean": float(brightness.mean()), "spread": float(brightness.std())}


def tensor_summary(given: np.ndarray) -> dict[str, Any]:
    """A tensor instance's values (or, past TENSOR_VALUES of them, their mean, spread, minimum and maximum)."""
    values = given.astype(np.float32).ravel()
    summary = {"kind": "tensor", "mean": float(values.mean()), "spread": float(values.std()),
               "minimum": float(values.min()), "maximum": float(values.max())}
    return summary | ({"values": values.tolist()} if values.size <= TENSOR_VALUES else {})
