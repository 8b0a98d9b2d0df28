"""Array sources: `digits` (scikit-learn's, built in) and `npz:<path>` (arrays in an .npz file)."""
from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from tasks.data.source_data import SPLIT_ALIASES, SourceData, SourceError, SplitData, file_sha256
from tasks.paths import resolve_path


def digits_identity() -> dict[str, Any]:
    """What identifies the digits: the scikit-learn release that ships them (asked without importing it: 2 s)."""
    return {"sklearn": version("scikit-learn")}


def load_digits() -> SourceData:
    """scikit-learn's digits: 1,797 real 8x8 grey images, 0..16 rescaled to 0..255."""
    from sklearn.datasets import load_digits as sklearn_digits
    bunch = sklearn_digits()
    images = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)[..., np.newaxis]
    return SourceData("digits", [str(c) for c in bunch.target_names],
                      {"train": SplitData(bunch.target.astype(np.int64), arrays=images)}, digits_identity())


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


def open_npz(path: Path) -> Any:
    """The arrays of an .npz file; SourceError when the file is not one (no pickled objects are loaded)."""
    import zipfile
    try:
        arrays = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        raise SourceError(f"{path} is not a NumPy .npz archive of arrays ({type(error).__name__})") from None
    if not isinstance(arrays, np.lib.npyio.NpzFile):
        raise SourceError(f"{path} is a single .npy array, not an .npz archive with x and y")
    return arrays


def load_npz(argument: str) -> SourceData:
    """Arrays from an .npz file; `classes` (names) is optional."""
    path = resolve_path(argument)
    if not path.is_file():
        raise SourceError(f"npz file not found: {path}")
    with open_npz(path) as arrays:
        splits = {split: SplitData(arrays[y].astype(np.int64).reshape(-1),
                                   arrays=_as_uint8_images(arrays[x], f"{path.name}:{x}"))
                  for split, (x, y) in _npz_split_keys(set(arrays.files)).items()}
        labels = np.concatenate([s.labels for s in splits.values()])
        classes = ([str(c) for c in arrays["classes"]] if "classes" in arrays.files
                   else [str(i) for i in range(int(labels.max()) + 1)])
    for split, data in splits.items():
        images = len(data.arrays) if data.arrays is not None else 0
        if images != len(data.labels):
            raise SourceError(f"{path.name}: {split} has {images} images but {len(data.labels)} labels")
    if labels.min() < 0 or labels.max() >= len(classes):
        raise SourceError(f"{path.name}: labels must lie in 0..{len(classes) - 1}")
    return SourceData(f"npz:{argument}", classes, splits, {"sha256": file_sha256(path)})
