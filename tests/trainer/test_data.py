"""The per-rank input pipeline: ranks read disjoint parts that together are the whole split."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.data.prepare import prepare
from tasks.params import DataParams
from tests.helpers import read_split
from trainer.data import rank_shards
from trainer.prepared_data import read_manifest


@pytest.mark.parametrize("shards", [8, 1])
def test_two_ranks_read_disjoint_complete_parts(digits_data: Path, tmp_path: Path, shards: int) -> None:
    data_dir = digits_data
    if shards == 1:  # fewer shards than ranks: split by record
        data_dir = tmp_path / "one-shard"
        prepare(DataParams(min_shards=1), data_dir)
        assert rank_shards(read_manifest(data_dir), "train", 0, 2) == ([0], True)
    parts = [read_split(data_dir, "train", rank, 2)[0].reshape(-1, 64) for rank in (0, 1)]
    everything = read_split(data_dir, "train")[0].reshape(-1, 64)
    assert len(parts[0]) + len(parts[1]) == len(everything)
    as_rows = lambda a: sorted(map(bytes, a.astype(np.uint8)))  # noqa: E731
    assert as_rows(np.concatenate(parts)) == as_rows(everything)
    assert min(len(parts[0]), len(parts[1])) > 0
