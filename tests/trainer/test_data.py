"""The per-rank input pipeline: ranks read disjoint, balanced shares that together are the whole split, at any
number of ranks and shards, in evaluation and in training."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.data.prepare import prepare
from tasks.params import DataParams
from tests.helpers import read_split
from trainer.data import rank_dataset
from trainer.prepared_data import read_manifest
from trainer.sharding import Piece, rank_share, split_shares, training_plan


@pytest.mark.parametrize("shards", [8, 1])
def test_two_ranks_read_disjoint_complete_parts(digits_data: Path, tmp_path: Path, shards: int) -> None:
    data_dir = digits_data
    if shards == 1:  # fewer shards than ranks: split by record
        data_dir = tmp_path / "one-shard"
        prepare(DataParams(min_shards=1), data_dir)
        assert rank_share(read_manifest(data_dir), "train", 0, 2).pieces == (Piece(0, 0, 628),)
    parts = [read_split(data_dir, "train", rank, 2)[0].reshape(-1, 64) for rank in (0, 1)]
    everything = read_split(data_dir, "train")[0].reshape(-1, 64)
    assert len(parts[0]) + len(parts[1]) == len(everything)
    as_rows = lambda a: sorted(map(bytes, a.astype(np.uint8)))  # noqa: E731
    assert as_rows(np.concatenate(parts)) == as_rows(everything)
    assert min(len(parts[0]), len(parts[1])) > 0


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 9, 16, 64])
def test_shares_are_disjoint_balanced_and_complete(size: int) -> None:
    counts = [157, 157, 157, 157, 157, 157, 157, 158]
    for seed in (None, 0, 42):
        shares = split_shares(counts, size, seed)
        seen = [(piece.shard, piece.skip + i) for share in shares for piece in share.pieces for i in range(piece.take)]
        assert len(seen) == len(set(seen)) == sum(counts)  # every record exactly once
        assert max(s.records for s in shares) - min(s.records for s in shares) <= 1
    assert split_shares(counts, size, 42) == split_shares(counts, size, 42)  # the same on every rank


def numbered_data(folder: Path, count: int = 1000, min_shards: int = 8) -> Path:
    """Prepared data whose every training image says its own number (pixels 0 and 1: number mod 256, div 256)."""
    images = np.zeros((count, 8, 8), np.uint8)
    images[:, 0, 0], images[:, 0, 1] = np.arange(count) % 256, np.arange(count) // 256
    np.savez(folder / "numbered.npz", x_train=images, y_train=np.zeros(count, np.int64),
             x_test=images[:20], y_test=np.zeros(20, np.int64))
    prepare(DataParams(dataset=f"npz:{folder / 'numbered.npz'}", min_shards=min_shards), folder / "prepared",
            progress=False)
    return folder / "prepared"


def one_epoch(data_dir: Path, rank: int, size: int, batch_size: int, steps: int) -> list[int]:
    """The image numbers one rank trains on in its first epoch."""
    dataset = rank_dataset(data_dir, read_manifest(data_dir), "train", rank=rank, size=size, batch_size=batch_size,
                           training=True, seed=7 + rank, shard_seed=7)
    numbers = []
    for images, _ in dataset.take(steps):
        pixels = images.numpy().astype(np.int64)
        numbers += (pixels[:, 0, 0, 0] + 256 * pixels[:, 0, 1, 0]).tolist()
    return numbers


@pytest.mark.parametrize("size", [1, 2, 3, 7, 9, 16])
def test_training_epochs_cover_the_split_once_at_any_rank_count(tmp_path: Path, size: int) -> None:
    data_dir = numbered_data(tmp_path)
    manifest = read_manifest(data_dir)
    total = manifest["splits"]["train"]["count"]
    plan = training_plan(manifest, size, 8, seed=7)
    epochs = [one_epoch(data_dir, rank, size, 8, plan.steps_per_epoch) for rank in range(size)]
    seen = [number for epoch in epochs for number in epoch]
    assert len(seen) == len(set(seen)) == size * plan.steps_per_epoch * 8  # disjoint, no record twice
    assert total - len(seen) == sum(plan.dropped) and max(plan.dropped) < 8 + 1  # what is left out is reported
    assert set(seen) <= set(range(1000))


def test_augmentation_applies_only_the_named_operations() -> None:
    import tensorflow as tf

    from trainer.data import augment
    image = tf.constant(np.arange(8 * 8, dtype=np.float32).reshape(8, 8, 1))
    assert np.array_equal(augment(image, (8, 8, 1), ()).numpy(), image.numpy())
    for _ in range(8):
        flipped = augment(image, (8, 8, 1), ("flip",)).numpy()
        assert np.array_equal(flipped, image.numpy()) or np.array_equal(flipped, image.numpy()[:, ::-1])
    assert augment(image, (8, 8, 1), ("crop", "brightness", "contrast")).shape == (8, 8, 1)


def test_auto_cache_keeps_in_memory_only_what_fits_well() -> None:
    from trainer.data import cache_in_memory, decoded_bytes
    imagenet_share = 1_281_167 // 8  # one of 8 ranks' share of an ImageNet-sized training split
    assert decoded_bytes(imagenet_share, (224, 224, 3)) > 24e9  # about 24 GB decoded
    assert not cache_in_memory("auto", imagenet_share, (224, 224, 3), available=24 << 30, processes=8)
    assert cache_in_memory("auto", 1257, (8, 8, 1), available=24 << 30, processes=2)  # digits: 80 kB
    limit = (24 << 30) // (4 * 2)  # a quarter of the memory, shared by 2 ranks of the host
    assert cache_in_memory("auto", limit // (64 * 64 * 3), (64, 64, 3), available=24 << 30, processes=2)
    assert not cache_in_memory("auto", limit // (64 * 64 * 3) + 1, (64, 64, 3), available=24 << 30, processes=2)
    assert cache_in_memory(True, imagenet_share, (224, 224, 3), 0, 1) and not cache_in_memory(False, 1, (8, 8, 1),
                                                                                              1 << 40, 1)
