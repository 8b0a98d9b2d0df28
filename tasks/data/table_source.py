"""`table:<path>`: a CSV or Parquet table of numeric feature columns and one or several target columns.

data.features names the feature columns (None: every column but the target's), data.target the target column(s)
(None: the last column). A target of strings is classification with the sorted names as classes; of integers,
classification by class id; of floats, regression. Splits are carved from the one table, by seed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.data.source_data import SourceData, SourceError, file_sha256
from tasks.data.tensor_source import class_ids, target_matrix, tensor_source
from tasks.paths import resolve_path

TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def table_identity(argument: str) -> dict[str, Any]:
    """What identifies a table's content, cheaply: its bytes' sha256 (the columns used are in the params)."""
    path = resolve_path(argument)
    return {"sha256": file_sha256(path) if path.is_file() else "missing"}


def read_table(path: Path) -> Any:
    """The table as a pandas DataFrame; SourceError for a missing file, an unknown suffix or unreadable bytes."""
    import pandas as pd
    if not path.is_file():
        raise SourceError(f"table file not found: {path}")
    kind = TABLE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise SourceError(f"{path.name}: a table must be .csv or .parquet (got {path.suffix or 'no suffix'})")
    try:
        return pd.read_csv(path) if kind == "csv" else pd.read_parquet(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as error:
        raise SourceError(f"{path.name} cannot be read as {kind}: {str(error).splitlines()[0]}") from None


def columns_of(frame: Any, features: list[str] | None, target: list[str] | str | None,
               where: str) -> tuple[list[str], list[str]]:
    """(feature columns, target columns) as data.features and data.target name them, each one checked."""
    names = [str(c) for c in frame.columns]
    targets = [target] if isinstance(target, str) else list(target) if target else names[-1:]
    chosen = features if features is not None else [name for name in names if name not in targets]
    missing = [name for name in [*targets, *chosen] if name not in names]
    if missing:
        raise SourceError(f"{where} has no column {', '.join(map(repr, missing))} (its columns: {', '.join(names)})")
    both = sorted(set(chosen) & set(targets))
    if both:
        raise SourceError(f"{where}: column {', '.join(map(repr, both))} is both a feature and a target")
    if not chosen:
        raise SourceError(f"{where}: no feature columns left beside the target {', '.join(targets)}")
    return chosen, targets


def _checked_columns(frame: Any, features: list[str], targets: list[str], where: str) -> None:
    """One line for non-numeric feature columns, then one for missing values (NaN), each naming the columns."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype
    text = [name for name in features if not (is_numeric_dtype(frame[name]) or is_bool_dtype(frame[name]))]
    if text:
        raise SourceError(f"{where}: feature column {', '.join(map(repr, text))} is not numeric "
                          f"({frame[text[0]].dtype}): encode it as numbers or leave it out of data.features")
    counts = {name: int(frame[name].isna().sum()) for name in [*features, *targets]}
    missing = {name: count for name, count in counts.items() if count}
    if missing:
        raise SourceError(f"{where}: missing values (NaN) in column " + ", ".join(
            f"{name!r} ({count} of {len(frame)})" for name, count in missing.items()) + ": fill or drop those rows")


def _targets(frame: Any, targets: list[str], where: str) -> tuple[np.ndarray, list[str] | None, bool]:
    """(float64 targets (N, k), class names when they were strings, whether the columns are integers)."""
    from pandas.api.types import is_bool_dtype, is_integer_dtype, is_numeric_dtype
    strings = [name for name in targets if not is_numeric_dtype(frame[name]) and not is_bool_dtype(frame[name])]
    if strings and len(targets) > 1:
        raise SourceError(f"{where}: target column {', '.join(map(repr, strings))} holds class names: a "
                          "classification target must be the only target column")
    if strings:
        ids, classes = class_ids(frame[strings[0]].to_numpy(), None, where)
        return ids.astype(np.float64).reshape(-1, 1), classes, True
    integer = all(is_integer_dtype(frame[name]) or is_bool_dtype(frame[name]) for name in targets)
    return target_matrix(frame[targets].to_numpy(np.float64), f"{where} target"), None, integer


def load_table(argument: str, features: list[str] | None, target: list[str] | str | None) -> SourceData:
    """Features and targets of a CSV or Parquet table, checked (see the module docstring)."""
    path = resolve_path(argument)
    frame = read_table(path)
    if not len(frame):
        raise SourceError(f"{path.name}: the table has no rows")
    chosen, targets = columns_of(frame, features, target, path.name)
    _checked_columns(frame, chosen, targets, path.name)
    y, classes, integer = _targets(frame, targets, path.name)
    x = frame[chosen].to_numpy(np.float32)
    if not np.isfinite(x).all():
        bad = [name for name in chosen if not np.isfinite(frame[name].to_numpy(np.float64)).all()]
        raise SourceError(f"{path.name}: infinite values in column {', '.join(map(repr, bad))}: fill or drop them")
    return tensor_source(f"table:{argument}", {"train": (x, y)}, table_identity(argument), classes=classes,
                         integer=integer, class_names_only=classes is not None, feature_names=chosen,
                         target_names=targets)
