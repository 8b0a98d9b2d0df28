"""tensorflow-datasets sources: read through tfds (its mock data here), or one line when absent and downloads are
off."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.data.prepare import prepare
from tasks.data.source_data import SourceError
from tasks.data.validate import validate
from tasks.params import DataParams
from trainer.prepared_data import SPLITS


def test_tfds_source_through_mock_data(tmp_path: Path) -> None:
    import tensorflow_datasets as tfds
    params = DataParams(dataset="tfds:mnist", data_dir=str(tmp_path / "tfds"), val_fraction=0.25)
    with tfds.testing.mock_data(num_examples=40):
        manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    counts = {split: manifest["splits"][split]["count"] for split in SPLITS}
    assert counts == {"train": 30, "validation": 10, "test": 40}  # validation carved from train by seed
    assert manifest["classes"] == [str(i) for i in range(10)] and manifest["image_shape"] == [28, 28, 1]
    assert manifest["formats"] == {"png": 80}
    assert validate(tmp_path / "prepared")["splits"]["test"]["records"] == 40


def test_tfds_without_data_and_downloads_off_says_what_to_do(tmp_path: Path) -> None:
    params = DataParams(dataset="tfds:mnist", data_dir=str(tmp_path / "empty"), download=False)
    with pytest.raises(SourceError, match=r"not in .*empty and downloads are off: set data.download: true"):
        prepare(params, tmp_path / "prepared", progress=False)
