"""Dataset sources: `digits`, `npz:<path>`, `folder:<path>` and `tfds:<name>[:<version>]`.

Each loads into SourceData: per split, the labels plus either raw uint8 images (array sources, to be PNG-encoded)
or already encoded image bytes / image files (kept as they are, never re-encoded).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tasks.paths import ROOT

IMAGE_SUFFIXES = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png"}
SPLIT_ALIASES = {"train": "train", "validation": "validation", "val": "validation", "valid": "validation",
                 "test": "test"}


class SourceError(ValueError):
    """A source cannot be read; the message says what to do."""


@dataclass
class SplitData:
    """One split: labels plus exactly one of arrays (N, H, W, C uint8), blobs (encoded bytes) or files."""
    labels: np.ndarray
    arrays: np.ndarray | None = None
    blobs: list[bytes] | None = None
    files: list[str] | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, indices: np.ndarray) -> "SplitData":
        """The records at `indices`, in that order."""
        pick = lambda items: None if items is None else [items[i] for i in indices]  # noqa: E731
        arrays = None if self.arrays is None else self.arrays[indices]
        return SplitData(self.labels[indices], arrays, pick(self.blobs), pick(self.files))


@dataclass
class SourceData:
    """A loaded source: its splits (train always; validation and test when the source has them)."""
    name: str
    classes: list[str]
    splits: dict[str, SplitData]
    identity: dict[str, Any] = field(default_factory=dict)


def parse_dataset(spec: str) -> tuple[str, str]:
    """`folder:/x` -> ('folder', '/x'); `digits` -> ('digits', '')."""
    kind, _, argument = spec.partition(":")
    return kind, argument


def resolve_path(argument: str) -> Path:
    """A source path as given, relative paths taken from the repo root."""
    path = Path(argument).expanduser()
    return path if path.is_absolute() else ROOT / path


def load_digits() -> SourceData:
    """scikit-learn's digits: 1,797 real 8x8 grey images, 0..16 rescaled to 0..255."""
    import sklearn
    from sklearn.datasets import load_digits as sklearn_digits
    bunch = sklearn_digits()
    images = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)[..., np.newaxis]
    return SourceData("digits", [str(c) for c in bunch.target_names],
                      {"train": SplitData(bunch.target.astype(np.int64), arrays=images)},
                      {"sklearn": sklearn.__version__})


def _as_uint8_images(x: np.ndarray, where: str) -> np.ndarray:
    if x.ndim == 3:
        x = x[..., np.newaxis]
    if x.ndim != 4 or x.shape[-1] not in (1, 3, 4):
        raise SourceError(f"{where}: images must be (N, H, W) or (N, H, W, 1|3|4), got {x.shape}")
    if x.dtype != np.uint8:
        if x.min() < 0 or x.max() > 255:
            raise SourceError(f"{where}: pixel values must lie in 0..255 (got {x.min()}..{x.max()})")
        x = np.rint(x * 255.0 if x.max() <= 1.0 else x).astype(np.uint8)
    return x


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _npz_split_keys(keys: set[str]) -> dict[str, tuple[str, str]]:
    """Split name -> (x key, y key): `x`/`y`, or `x_train`/`y_train` (+ `_val`/`_validation`, `_test`)."""
    if {"x", "y"} <= keys:
        return {"train": ("x", "y")}
    found = {}
    for suffix, split in SPLIT_ALIASES.items():
        if {f"x_{suffix}", f"y_{suffix}"} <= keys:
            found[split] = (f"x_{suffix}", f"y_{suffix}")
    if "train" not in found:
        raise SourceError(f"npz needs arrays x and y (or x_train and y_train); it has {sorted(keys)}")
    return found


def load_npz(argument: str) -> SourceData:
    """Arrays from an .npz file; `classes` (names) is optional."""
    path = resolve_path(argument)
    if not path.is_file():
        raise SourceError(f"npz file not found: {path}")
    with np.load(path, allow_pickle=False) as arrays:
        splits = {split: SplitData(arrays[y].astype(np.int64).reshape(-1),
                                   arrays=_as_uint8_images(arrays[x], f"{path.name}:{x}"))
                  for split, (x, y) in _npz_split_keys(set(arrays.files)).items()}
        labels = np.concatenate([s.labels for s in splits.values()])
        classes = ([str(c) for c in arrays["classes"]] if "classes" in arrays.files
                   else [str(i) for i in range(int(labels.max()) + 1)])
    for split, data in splits.items():
        if len(data.arrays) != len(data.labels):
            raise SourceError(f"{path.name}: {split} has {len(data.arrays)} images but {len(data.labels)} labels")
    if labels.min() < 0 or labels.max() >= len(classes):
        raise SourceError(f"{path.name}: labels must lie in 0..{len(classes) - 1}")
    return SourceData(f"npz:{argument}", classes, splits, {"sha256": file_sha256(path)})


def load_source(spec: str, data_dir: Path, download: bool) -> SourceData:
    """Load the dataset named by `spec` (see the module docstring)."""
    kind, argument = parse_dataset(spec)
    if kind == "digits":
        return load_digits()
    if kind == "npz":
        return load_npz(argument)
    if kind == "folder":
        from tasks.source_folder import load_folder
        return load_folder(argument)
    if kind == "tfds":
        from tasks.source_tfds import load_tfds
        return load_tfds(argument, data_dir, download)
    raise SourceError(f"unknown dataset {spec!r}")


def source_identity(spec: str, data_dir: Path) -> dict[str, Any]:
    """What identifies a source's content, cheaply (no image is read): for the prepare cache."""
    kind, argument = parse_dataset(spec)
    if kind == "npz":
        path = resolve_path(argument)
        return {"sha256": file_sha256(path) if path.is_file() else "missing"}
    if kind == "folder":
        from tasks.source_folder import load_folder
        return load_folder(argument).identity
    if kind == "tfds":
        return {"tfds": argument, "data_dir": str(data_dir)}
    return load_digits().identity
