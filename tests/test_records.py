"""TFRecord conversion: write-then-read equals the source, validation catches damage, ranks split cleanly."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tasks.params import DataParams
from tasks.prepare import carve_splits
from tasks.sources import load_digits
from tasks.validate import DataInvalid, validate
from trainer.data import rank_dataset, rank_shards
from trainer.records import SPLITS, read_manifest


def read_split(data_dir: Path, split: str, rank: int = 0, size: int = 1) -> tuple[np.ndarray, np.ndarray]:
    manifest = read_manifest(data_dir)
    images, labels = [], []
    for batch_images, batch_labels in rank_dataset(data_dir, manifest, split, rank=rank, size=size, batch_size=512):
        images.append(batch_images.numpy())
        labels.append(batch_labels.numpy())
    return np.concatenate(images), np.concatenate(labels)


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


def damaged_copy(digits_data: Path, tmp_path: Path, truncate: bool) -> tuple[Path, str]:
    copy = tmp_path / "prepared"
    shutil.copytree(digits_data, copy)
    victim = copy / read_manifest(copy)["splits"]["validation"]["shards"][3]["file"]
    data = bytearray(victim.read_bytes())
    if truncate:
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    return copy, victim.name


@pytest.mark.parametrize("truncate", [False, True], ids=["corrupt", "truncated"])
def test_validation_names_a_damaged_shard(digits_data: Path, tmp_path: Path, truncate: bool) -> None:
    copy, name = damaged_copy(digits_data, tmp_path, truncate)
    with pytest.raises(DataInvalid, match=rf"^{name}: sha256 differs from the manifest; record (\d+): ") as error:
        validate(copy)
    first_bad = int(error.value.args[0].split("record ")[1].split(":")[0])
    assert 0 < first_bad < read_manifest(copy)["splits"]["validation"]["shards"][3]["count"]


@pytest.mark.parametrize("shards", [8, 1])
def test_two_ranks_read_disjoint_complete_parts(digits_data: Path, tmp_path: Path, shards: int) -> None:
    data_dir = digits_data
    if shards == 1:  # fewer shards than ranks: split by record
        from tasks.prepare import prepare
        data_dir = tmp_path / "one-shard"
        prepare(DataParams(min_shards=1), data_dir)
        assert rank_shards(read_manifest(data_dir), "train", 0, 2) == ([0], True)
    parts = [read_split(data_dir, "train", rank, 2)[0].reshape(-1, 64) for rank in (0, 1)]
    everything = read_split(data_dir, "train")[0].reshape(-1, 64)
    assert len(parts[0]) + len(parts[1]) == len(everything)
    as_rows = lambda a: sorted(map(bytes, a.astype(np.uint8)))  # noqa: E731
    assert as_rows(np.concatenate(parts)) == as_rows(everything)
    assert min(len(parts[0]), len(parts[1])) > 0
