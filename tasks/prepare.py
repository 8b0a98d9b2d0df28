"""prepare: a dataset -> train / validation / test TFRecord shards plus manifest.json."""
from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.atomic import atomic_dir
from tasks.params import DataParams
from tasks.paths import PREPARED_DIR
from trainer.records import MANIFEST_NAME, SPLITS, image_example


@dataclass(frozen=True)
class ImageArrays:
    """A whole dataset in memory: uint8 images (N, H, W, C), int labels (N,), class names."""
    images: np.ndarray
    labels: np.ndarray
    classes: list[str]
    source: str


def load_digits() -> ImageArrays:
    """scikit-learn's digits: 1,797 real 8x8 grey images, 0..16 rescaled to 0..255."""
    from sklearn.datasets import load_digits as sklearn_digits
    bunch = sklearn_digits()
    images = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)[..., np.newaxis]
    return ImageArrays(images, bunch.target.astype(np.int64), [str(c) for c in bunch.target_names], "digits")


def load_source(dataset: str) -> ImageArrays:
    """The arrays of a named dataset source."""
    if dataset == "digits":
        return load_digits()
    raise ValueError(f"unknown dataset {dataset!r}")


def split_indices(count: int, params: DataParams) -> dict[str, np.ndarray]:
    """A seeded permutation cut into train / validation / test."""
    order = np.random.default_rng(params.seed).permutation(count)
    n_test = max(1, round(count * params.test_fraction))
    n_val = max(1, round(count * params.val_fraction))
    return {"test": order[:n_test], "validation": order[n_test:n_test + n_val], "train": order[n_test + n_val:]}


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of one uint8 (H, W, C) image."""
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(buffer, format="PNG")
    return buffer.getvalue()


def write_split(arrays: ImageArrays, indices: np.ndarray, split: str, out_dir: Path,
                params: DataParams) -> dict[str, Any]:
    """Write one split's shards; returns its manifest entry."""
    import tensorflow as tf
    records = [image_example(encode_png(arrays.images[i]), "png", int(arrays.labels[i]), arrays.images.shape[1:])
               for i in indices]
    total_bytes = sum(len(r) for r in records)
    num_shards = min(len(records), max(params.min_shards, math.ceil(total_bytes / params.shard_bytes)))
    shards = []
    for shard_index, chunk in enumerate(np.array_split(np.arange(len(records)), num_shards)):
        name = f"{split}-{shard_index:05d}-of-{num_shards:05d}.tfrecord"
        with tf.io.TFRecordWriter(str(out_dir / name)) as writer:
            for i in chunk:
                writer.write(records[i])
        data = (out_dir / name).read_bytes()
        shards.append({"file": name, "count": len(chunk), "bytes": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()})
    return {"count": len(records), "shards": shards}


def prepare(params: DataParams, out_dir: Path = PREPARED_DIR) -> dict[str, Any]:
    """Convert the dataset in `params` to sharded TFRecords under `out_dir`; returns the manifest."""
    arrays = load_source(params.dataset)
    splits = split_indices(len(arrays.labels), params)
    with atomic_dir(out_dir) as tmp:
        manifest = {
            "format_version": 1,
            "source": arrays.source,
            "params": params.model_dump(),
            "classes": arrays.classes,
            "num_classes": len(arrays.classes),
            "image_shape": list(arrays.images.shape[1:]),
            "splits": {split: write_split(arrays, splits[split], split, tmp, params) for split in SPLITS},
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    return manifest
