"""What every dataset source loads into (SplitData, SourceData), and the helpers all sources share.

Per split: the labels plus either raw uint8 images (array sources, to be PNG-encoded) or already encoded image
bytes / image files (kept as they are, never re-encoded); or, for tensor data, float features and float targets.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_SUFFIXES = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png"}
SPLIT_ALIASES = {"train": "train", "validation": "validation", "val": "validation", "valid": "validation",
                 "test": "test"}


class SourceError(ValueError):
    """A source cannot be read; the message says what to do."""
    bad_input = True


@dataclass
class SplitData:
    """One split: labels plus exactly one of arrays (N, H, W, C uint8), blobs (encoded bytes), files or features.

    Image data: labels are int64 class ids (N,). Tensor data: features are float32 (N, *feature_shape) and labels
    float64 targets (N, k) (a class id as a float for classification)."""
    labels: np.ndarray
    arrays: np.ndarray | None = None
    blobs: list[bytes] | None = None
    files: list[str] | None = None
    features: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, indices: np.ndarray) -> "SplitData":
        """The records at `indices`, in that order."""
        pick = lambda items: None if items is None else [items[i] for i in indices]  # noqa: E731
        arrays = None if self.arrays is None else self.arrays[indices]
        features = None if self.features is None else self.features[indices]
        return SplitData(self.labels[indices], arrays, pick(self.blobs), pick(self.files), features)


@dataclass(frozen=True)
class TensorInfo:
    """What tensor data's manifest says of its targets beyond the class names (see docs of the manifest)."""
    task: str  # the task the targets say: classification (class ids or names) or regression (real values)
    target_names: list[str]
    feature_names: list[str] | None = None  # table columns; None for arrays
    integer_targets: bool = False  # one target per example, a whole number >= 0 (classification may be stated)
    class_names_only: bool = False  # the targets were names mapped to ids: regression is refused


@dataclass
class SourceData:
    """A loaded source: its splits (train always; validation and test when the source has them)."""
    name: str
    classes: list[str]
    splits: dict[str, SplitData]
    identity: dict[str, Any] = field(default_factory=dict)
    tensor: TensorInfo | None = None  # None: image data

    @property
    def kind(self) -> str:
        return "image" if self.tensor is None else "tensor"


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
