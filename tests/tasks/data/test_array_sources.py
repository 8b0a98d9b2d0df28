"""Array sources: npz files (one split or their own splits, class names) and the built-in digits."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.data.array_sources import load_digits
from tasks.data.prepare import prepare
from tasks.params import DataParams
from tests.helpers import read_split
from trainer.prepared_data import SPLITS


def test_npz_source_converts_in_parallel_pixel_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (5000, 12, 10, 3), dtype=np.uint8), rng.integers(0, 7, 5000)
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    params = DataParams(dataset=f"npz:{tmp_path / 'arrays.npz'}", workers=2, min_shards=4)
    manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    assert manifest["image_shape"] == [12, 10, 3] and manifest["num_classes"] == 7
    images, labels = zip(*(read_split(tmp_path / "prepared", split) for split in SPLITS))
    read_back = sorted(zip(np.concatenate(labels).tolist(), map(bytes, np.concatenate(images).astype(np.uint8))))
    assert read_back == sorted(zip(y.tolist(), map(bytes, x)))


def test_npz_with_its_own_splits_keeps_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    arrays = {f"{k}_{s}": v for s, n in (("train", 60), ("test", 25)) for k, v in
              (("x", rng.integers(0, 256, (n, 6, 6), dtype=np.uint8)), ("y", rng.integers(0, 3, n)))}
    np.savez(tmp_path / "split.npz", classes=np.array(["cat", "dog", "eel"]), **arrays)
    manifest = prepare(DataParams(dataset=f"npz:{tmp_path / 'split.npz'}"), tmp_path / "p", progress=False).manifest
    counts = {split: manifest["splits"][split]["count"] for split in SPLITS}
    assert counts["test"] == 25 and counts["train"] + counts["validation"] == 60
    assert manifest["classes"] == ["cat", "dog", "eel"] and manifest["channels"] == 1


def test_the_built_in_digits_are_8x8_grey_uint8_images_of_ten_classes() -> None:
    digits = load_digits()
    train = digits.splits["train"]
    assert digits.classes == [str(i) for i in range(10)] and list(digits.splits) == ["train"]
    assert train.arrays is not None and train.arrays.shape == (1797, 8, 8, 1) and train.arrays.dtype == np.uint8
    assert train.arrays.max() == 255 and sorted(set(train.labels.tolist())) == list(range(10))


def test_the_digits_read_from_scikit_learn_s_file_are_its_load_digits() -> None:
    from sklearn.datasets import load_digits as sklearn_digits
    bunch, train = sklearn_digits(), load_digits().splits["train"]
    assert train.arrays is not None
    assert np.array_equal(train.arrays[..., 0], np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8))
    assert np.array_equal(train.labels, bunch.target) and train.labels.dtype == np.int64
