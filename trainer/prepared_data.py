"""The prepared data as the processes read it: the manifest, the shard files, and the TFRecord schemas
(tf.train.Example) of images and of tensor data as readers parse them. The writer, without TensorFlow, is
tasks/data/tfrecord_writer.py."""
from __future__ import annotations

import json
import math
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


def feature_shape(manifest: dict[str, Any]) -> tuple[int, ...]:
    """The shape of one example's features (tensor data)."""
    return tuple(int(v) for v in manifest["feature_shape"])


def target_count(manifest: dict[str, Any]) -> int:
    """The number of targets per example (tensor data; 1 for a class id)."""
    return int(math.prod(manifest.get("target_shape") or [1]))


def tensor_feature_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parsing spec of a tensor record: "x", the features flattened (row-major), "y", the targets; float32."""
    import tensorflow as tf
    return {"x": tf.io.FixedLenFeature([math.prod(feature_shape(manifest))], tf.float32),
            "y": tf.io.FixedLenFeature([target_count(manifest)], tf.float32)}


def read_manifest(data_dir: Path) -> dict[str, Any]:
    """The manifest of a prepared data directory; a clear error when it is missing."""
    path = Path(data_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no prepared data: {path} is missing (run the prepare step)")
    return json.loads(path.read_text())


def shard_paths(data_dir: Path, manifest: dict[str, Any], split: str) -> list[str]:
    """Absolute shard paths of one split, in manifest order."""
    return [str(Path(data_dir) / shard["file"]) for shard in manifest["splits"][split]["shards"]]


def data_kind(manifest: dict[str, Any]) -> str:
    """`image` (encoded images with class labels) or `tensor` (float features with a target); manifests older than
    tensor data are image ones."""
    return str(manifest.get("kind", "image"))


def data_task(manifest: dict[str, Any], task: str = "auto") -> str:
    """The task a training of this data does: `task` (train.task) when stated, else the data's own. ValueError when
    the data cannot serve the stated task (real targets for classification; class names for regression)."""
    own = str(manifest.get("task", "classification"))
    if task in ("auto", own):
        return own
    if task == "classification" and not manifest.get("integer_targets", False):
        raise ValueError(f"train.task is classification but the targets of {manifest.get('source')} are not class "
                         "ids (whole numbers 0..n-1)")
    if task == "regression" and manifest.get("class_names_only", False):
        raise ValueError(f"train.task is regression but the targets of {manifest.get('source')} are class names")
    return task


def output_size(manifest: dict[str, Any], task: str) -> int:
    """What the model's last axis holds: the class count (classification) or the number of targets (regression)."""
    if task == "classification":
        return int(manifest["num_classes"])
    return int(math.prod(manifest.get("target_shape") or [1]))
