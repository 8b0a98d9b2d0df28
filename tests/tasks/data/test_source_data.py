"""What sources load into: splits taken by index, file digests, and one clear line for a bad dataset spec."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from tasks.data.source_data import SplitData, file_sha256
from tasks.params import ParamsError, load_params


def test_a_split_takes_its_records_in_the_order_asked_whatever_it_holds() -> None:
    arrays = SplitData(np.array([0, 1, 2]), arrays=np.arange(3).reshape(3, 1, 1, 1))
    taken = arrays.take(np.array([2, 0]))
    assert taken.labels.tolist() == [2, 0] and taken.arrays is not None and taken.arrays.ravel().tolist() == [2, 0]
    files = SplitData(np.array([5, 6]), files=["a.png", "b.jpg"]).take(np.array([1]))
    assert (files.files, files.blobs, files.arrays, len(files)) == (["b.jpg"], None, None, 1)


def test_a_file_digest_is_its_sha256_read_in_blocks(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 5000  # more than one 1 MiB block
    (tmp_path / "f").write_bytes(blob)
    assert file_sha256(tmp_path / "f") == hashlib.sha256(blob).hexdigest()


@pytest.mark.parametrize(("dataset", "message"), [
    ("folder:/no/such/dir", "image folder /no/such/dir does not exist"),
    ("npz:/no/such.npz", "npz file /no/such.npz does not exist"),
    ("tfds:", "unknown dataset 'tfds:'"),
    ("csv:x", "unknown dataset 'csv:x'"),
])
def test_bad_dataset_spec_is_one_clear_line(dataset: str, message: str) -> None:
    with pytest.raises(ParamsError, match=f"bad parameter data.dataset: {message}"):
        load_params({"dataset": dataset})
