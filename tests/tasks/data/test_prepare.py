"""prepare: write-then-read equals the source; the manifest describes the data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.data.array_sources import load_digits
from tasks.data.prepare import carve_splits, prepare
from tasks.data.validate import validate
from tasks.params import DataParams
from tests.helpers import read_split
from trainer.prepared_data import SPLITS, read_manifest


@pytest.mark.parametrize("split", SPLITS)
def test_write_then_read_equals_source_arrays(digits_data: Path, split: str) -> None:
    source = carve_splits(load_digits(), DataParams())[split]
    images, labels = read_split(digits_data, split)
    assert images.dtype == np.float32 and images.shape == (len(source), 8, 8, 1)
    assert np.array_equal(images, np.rint(images))  # whole pixel values, nothing lost in between
    read_back = sorted(zip(labels.tolist(), map(bytes, images.astype(np.uint8))))
    written = sorted(zip(source.labels.tolist(), map(bytes, source.arrays)))
    assert read_back == written


def test_manifest_describes_the_data(digits_data: Path) -> None:
    manifest = read_manifest(digits_data)
    assert manifest["image_shape"] == [8, 8, 1] and manifest["num_classes"] == 10
    assert sum(manifest["splits"][s]["count"] for s in SPLITS) == 1797
    assert all(len(manifest["splits"][s]["shards"]) == 8 for s in SPLITS)
    assert validate(digits_data)["splits"]["train"]["records"] == manifest["splits"]["train"]["count"]


def test_prepare_again_with_same_source_and_params_is_skipped(tmp_path: Path) -> None:
    out = tmp_path / "prepared"
    assert prepare(DataParams(), out, progress=False).skipped is False
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert prepare(DataParams(workers=1), out, progress=False).skipped is True  # workers do not change data
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps
    assert prepare(DataParams(min_shards=4), out, progress=False).skipped is False
