"""Dataset sources by name: each name loads its source; a source's identity changes with its content, cheaply."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.data.source_data import SourceError
from tasks.data.sources import load_source, source_identity


def test_digits_and_an_npz_load_by_name(tmp_path: Path) -> None:
    assert load_source("digits", tmp_path, download=False).name == "digits"
    np.savez(tmp_path / "a.npz", x=np.zeros((4, 3, 3), np.uint8), y=np.array([0, 1, 0, 1]))
    loaded = load_source(f"npz:{tmp_path / 'a.npz'}", tmp_path, download=False)
    assert len(loaded.splits["train"]) == 4 and loaded.classes == ["0", "1"]


def test_an_npz_s_identity_is_its_content(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    np.savez(path, x=np.zeros((2, 3, 3), np.uint8), y=np.array([0, 1]))
    first = source_identity(f"npz:{path}", tmp_path)
    np.savez(path, x=np.ones((2, 3, 3), np.uint8), y=np.array([0, 1]))
    assert source_identity(f"npz:{path}", tmp_path) != first
    assert source_identity(f"npz:{tmp_path / 'gone.npz'}", tmp_path) == {"sha256": "missing"}
    assert source_identity("tfds:mnist", tmp_path) == {"tfds": "mnist", "data_dir": str(tmp_path)}


def test_a_missing_folder_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        load_source(f"folder:{tmp_path / 'none'}", tmp_path, download=False)
