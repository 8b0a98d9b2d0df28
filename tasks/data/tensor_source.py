"""Tensor data: float features of any shape with one or several targets (npz arrays, table columns), checked and
turned into SplitData, and the task the targets say (class ids or names: classification; real values: regression).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.data.source_data import SourceData, SourceError, SplitData, TensorInfo

NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats


def class_ids(names: np.ndarray, classes: list[str] | None, where: str) -> tuple[np.ndarray, list[str]]:
    """String targets -> (int64 ids, class names): the given classes' order, else the sorted distinct names."""
    text = names.astype(str).reshape(-1)
    classes = classes if classes is not None else sorted(set(text.tolist()))
    index = {name: i for i, name in enumerate(classes)}
    unknown = sorted(set(text.tolist()) - set(index))
    if unknown:
        raise SourceError(f"{where}: class name(s) {', '.join(map(repr, unknown[:3]))} not among the classes")
    return np.array([index[name] for name in text.tolist()], np.int64), classes


def not_finite_check(values: np.ndarray, where: str) -> None:
    """SourceError when any value is NaN or infinite, with their count."""
    bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
    if bad:
        raise SourceError(f"{where} has {bad} missing or infinite value(s) (NaN, inf): fill or drop them")


def float_features(x: np.ndarray, where: str) -> np.ndarray:
    """Numeric features -> float32 (N, *feature_shape); a 1-D x is one feature per example, (N, 1)."""
    if x.dtype.kind not in NUMERIC_KINDS or x.ndim < 1:
        raise SourceError(f"{where}: features must be an array of numbers (N, ...), got {x.dtype} {x.shape}")
    features = x.astype(np.float32).reshape(len(x), -1) if x.ndim == 1 else x.astype(np.float32)
    not_finite_check(features, where)
    return features


def target_matrix(y: np.ndarray, where: str) -> np.ndarray:
    """Numeric targets (N,) or (N, k) -> float64 (N, k)."""
    if y.dtype.kind not in NUMERIC_KINDS or y.ndim not in (1, 2):
        raise SourceError(f"{where}: targets must be numbers of shape (N,) or (N, k), got {y.dtype} {y.shape}")
    targets = y.astype(np.float64).reshape(len(y), -1)
    not_finite_check(targets, where)
    return targets


def whole_ids(targets: np.ndarray) -> bool:
    """One target per example, every one a whole number >= 0 (usable as class ids)."""
    return targets.shape[1] == 1 and bool(np.all(targets >= 0) and np.all(targets == np.round(targets)))


def infer_task(targets: np.ndarray, classes: list[str] | None, integer: bool,
               where: str) -> tuple[str, bool, list[str]]:
    """(task, integer_targets, classes) of all the targets (N, k). `classes` given: ids in range, classification;
    else whole numbers >= 0 are classification when `integer` (the data says they are integers), regression
    otherwise (classification may still be stated: integer_targets)."""
    ids = whole_ids(targets)
    if classes is not None:
        if not ids or targets.max() >= len(classes):
            raise SourceError(f"{where}: with {len(classes)} class names the targets must be class ids "
                              f"0..{len(classes) - 1}, one per example")
        return "classification", True, classes
    if not ids:
        return "regression", False, []
    return ("classification" if integer else "regression"), True, [str(i) for i in range(int(targets.max()) + 1)]


def tensor_source(name: str, splits: dict[str, tuple[np.ndarray, np.ndarray]], identity: dict[str, Any], *,
                  classes: list[str] | None = None, integer: bool = True, class_names_only: bool = False,
                  feature_names: list[str] | None = None, target_names: list[str] | None = None) -> SourceData:
    """SourceData of tensor data from (float32 features, float64 targets (N, k)) per split, all checked alike."""
    shapes = {split: (x.shape[1:], y.shape[1]) for split, (x, y) in splits.items()}
    if len(set(shapes.values())) > 1:
        raise SourceError(f"{name}: the splits differ in feature shape or target count: "
                          + ", ".join(f"{s} {list(f)} x {k}" for s, (f, k) in shapes.items()))
    for split, (x, y) in splits.items():
        if len(x) != len(y):
            raise SourceError(f"{name}: {split} has {len(x)} examples but {len(y)} targets")
        if not len(x):
            raise SourceError(f"{name}: {split} has no examples")
    targets = np.concatenate([y for _, y in splits.values()])
    task, integer_targets, classes = infer_task(targets, classes, integer, name)
    k = targets.shape[1]
    info = TensorInfo(task, target_names or (["y"] if k == 1 else [f"y{i}" for i in range(k)]), feature_names,
                      integer_targets, class_names_only)
    return SourceData(name, classes, {split: SplitData(y, features=x) for split, (x, y) in splits.items()},
                      identity, info)
