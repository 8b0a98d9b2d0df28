"""Dataset sources by name: `digits`, `npz:<path>`, `folder:<path>`, `tfds:<name>[:<version>]` and `table:<path>`.

Each loads into SourceData (tasks/data/source_data.py); the folder, tfds and table loaders are imported only when
used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.data.array_sources import digits_identity, load_digits, load_npz
from tasks.data.source_data import SourceData, SourceError, file_sha256
from tasks.params import parse_dataset
from tasks.paths import resolve_path


def load_source(spec: str, data_dir: Path, download: bool, features: list[str] | None = None,
                target: list[str] | str | None = None) -> SourceData:
    """Load the dataset named by `spec` (see the module docstring); `features` and `target` name a table's
    columns."""
    kind, argument = parse_dataset(spec)
    if kind == "digits":
        return load_digits()
    if kind == "npz":
        return load_npz(argument)
    if kind == "folder":
        from tasks.data.folder_source import load_folder
        return load_folder(argument)
    if kind == "tfds":
        from tasks.data.tfds_source import load_tfds
        return load_tfds(argument, data_dir, download)
    if kind == "table":
        from tasks.data.table_source import load_table
        return load_table(argument, features, target)
    raise SourceError(f"unknown dataset {spec!r}")


def source_identity(spec: str, data_dir: Path) -> dict[str, Any]:
    """What identifies a source's content, cheaply (no image is read): for the prepare cache."""
    kind, argument = parse_dataset(spec)
    if kind == "npz":
        path = resolve_path(argument)
        return {"sha256": file_sha256(path) if path.is_file() else "missing"}
    if kind == "folder":
        from tasks.data.folder_source import load_folder
        return load_folder(argument).identity
    if kind == "tfds":
        return {"tfds": argument, "data_dir": str(data_dir)}
    if kind == "table":
        from tasks.data.table_source import table_identity
        return table_identity(argument)
    return digits_identity()
