"""The prepared data as the processes read it: the manifest, the shard files, and the TFRecord image schema
(tf.train.Example) as readers parse it. The writer, without TensorFlow, is tasks/data/tfrecord_writer.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "validation", "test")


def feature_spec() -> dict[str, Any]:
    """The parsing spec matching image_example."""
    import tensorflow as tf
    return {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/format": tf.io.FixedLenFeature([], tf.string, default_value=b"png"),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/channels": tf.io.FixedLenFeature([], tf.int64),
    }


def read_manifest(data_dir: Path) -> dict[str, Any]:
    """The manifest of a prepared data directory; a clear error when it is missing."""
    path = Path(data_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no prepared data: {path} is missing (run the prepare step)")
    return json.loads(path.read_text())


def shard_paths(data_dir: Path, manifest: dict[str, Any], split: str) -> list[str]:
    """Absolute shard paths of one split, in manifest order."""
    return [str(Path(data_dir) / shard["file"]) for shard in manifest["splits"][split]["shards"]]
