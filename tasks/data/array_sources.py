"""Array sources: `digits` (scikit-learn's, built in) and `npz:<path>` (arrays in an .npz file: images or tensors)."""
from __future__ import annotations

from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from tasks.data.source_data import SPLIT_ALIASES, SourceData, SourceError, SplitData, file_sha256
from tasks.data.tensor_source import class_ids, float_features, target_matrix, tensor_source
from tasks.paths import resolve_path


def digits_identity() -> dict[str, Any]:
    """What identifies the digits: the scikit-learn release that ships them (asked without importing it: 2 s)."""
    return {"sklearn": version("scikit-learn")}


def load_digits() -> SourceData:
    """scikit-learn's digits: 1,797 real 8x8 grey images, 0..16 rescaled to 0..255, read from the file scikit-learn
    ships as its `load_digits` reads it (importing scikit-learn would cost 2 s of a 2.3 s conversion)."""
    rows = np.loadtxt(digits_file(), delimiter=",")  # a row: 64 pixels, then the class
    pixels, labels = rows[:, :-1].reshape(-1, 8, 8), rows[:, -1].astype(np.int64)
    images = np.clip(np.rint(pixels * (255.0 / 16.0)), 0, 255).astype(np.uint8)[..., np.newaxis]
    return SourceData("digits", [str(c) for c in range(10)], {"train": SplitData(labels, arrays=images)},
                      digits_identity())


def digits_file() -> Path:
    """scikit-learn's digits.csv.gz, found without importing the package."""
    spec = find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise SourceError("the built-in dataset needs scikit-learn (pip install scikit-learn)")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"


def _as_uint8_images(x: np.ndarray) -> np.ndarray:
    return (x[..., np.newaxis] if x.ndim == 3 else x).astype(np.uint8)


def _image_like(x: np.ndarray, y: np.ndarray) -> bool:
    """Integer pixels 0..255 of shape (N, H, W) or (N, H, W, 1|3|4) with one class id per image: image data."""
    shaped = x.ndim == 3 or (x.ndim == 4 and x.shape[-1] in (1, 3, 4))
    pixels = x.dtype.kind in "ui" and shaped and (not x.size or (x.min() >= 0 and x.max() <= 255))
    ids = y.dtype.kind in "biuf" and y.size == len(y) and (y.dtype.kind != "f" or bool(np.isfinite(y).all()))
    return bool(pixels and ids and (not y.size or (y.min() >= 0 and np.all(y == np.round(y)))))


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


def _npz_classes(arrays: Any) -> list[str] | None:
    return [str(c) for c in arrays["classes"]] if "classes" in arrays.files else None


def _named_targets(loaded: dict[str, tuple[np.ndarray, np.ndarray]], classes: list[str] | None,
                   where: str) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str] | None]:
    """String targets (class names) -> class ids, over all splits (the classes' order, else sorted names)."""
    if not any(y.dtype.kind in "US" for _, y in loaded.values()):
        return loaded, classes
    if classes is None:
        classes = sorted({str(name) for _, y in loaded.values() for name in y.reshape(-1).tolist()})
    return {split: (x, class_ids(y, classes, f"{where}:{split}")[0]) for split, (x, y) in loaded.items()}, classes


def load_npz(argument: str) -> SourceData:
    """Arrays from an .npz file (`classes`, names, optional): images (uint8 pixels with class ids or names) or tensor
    data (float features of any shape, or targets that are not class ids: tasks/data/tensor_source.py)."""
    path = resolve_path(argument)
    if not path.is_file():
        raise SourceError(f"npz file not found: {path}")
    with open_npz(path) as npz:
        keys = _npz_split_keys(set(npz.files))
        loaded = {split: (npz[x], npz[y]) for split, (x, y) in keys.items()}
        classes = _npz_classes(npz)
    named = any(y.dtype.kind in "US" for _, y in loaded.values())
    loaded, classes = _named_targets(loaded, classes, path.name)
    identity = {"sha256": file_sha256(path)}
    if all(_image_like(x, y) for x, y in loaded.values()):
        return _image_npz(argument, path, loaded, classes, identity)
    splits = {split: (float_features(x, f"{path.name}:{keys[split][0]}"),
                      target_matrix(y, f"{path.name}:{keys[split][1]}")) for split, (x, y) in loaded.items()}
    return tensor_source(f"npz:{argument}", splits, identity, classes=classes, class_names_only=named)


def _image_npz(argument: str, path: Path, loaded: dict[str, tuple[np.ndarray, np.ndarray]],
               classes: list[str] | None, identity: dict[str, Any]) -> SourceData:
    """Image data from uint8 pixels and class ids (PNG records, as ever)."""
    splits = {split: SplitData(y.astype(np.int64).reshape(-1), arrays=_as_uint8_images(x))
              for split, (x, y) in loaded.items()}
    labels = np.concatenate([s.labels for s in splits.values()])
    classes = classes if classes is not None else [str(i) for i in range(int(labels.max(initial=0)) + 1)]
    for split, data in splits.items():
        images = len(data.arrays) if data.arrays is not None else 0
        if images != len(data.labels):
            raise SourceError(f"{path.name}: {split} has {images} images but {len(data.labels)} labels")
    if len(labels) and labels.max() >= len(classes):
        raise SourceError(f"{path.name}: labels must lie in 0..{len(classes) - 1}")
    return SourceData(f"npz:{argument}", classes, splits, identity)
