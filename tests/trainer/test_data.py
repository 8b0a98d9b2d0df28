"""The per-rank input pipeline: ranks read disjoint, balanced shares that together are the whole split, at any
number of ranks and shards, in evaluation and in training."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tasks.data.prepare import prepare
from tasks.params import DataParams
from tests.helpers import numbered_data, read_split
from trainer.data import rank_dataset
from trainer.prepared_data import read_manifest
from trainer.sharding import Piece, rank_share, training_plan


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


def one_epoch(data_dir: Path, rank: int, size: int, batch_size: int, steps: int, cache: bool = True) -> list[int]:
    """The image numbers one rank trains on in its first epoch."""
    dataset = rank_dataset(data_dir, read_manifest(data_dir), "train", rank=rank, size=size, batch_size=batch_size,
                           training=True, seed=7 + rank, shard_seed=7, cache=cache)
    numbers = []
    for images, _ in dataset.take(steps):
        pixels = images.numpy().astype(np.int64)
        numbers += (pixels[:, 0, 0, 0] + 256 * pixels[:, 0, 1, 0]).tolist()
    return numbers


@pytest.mark.parametrize("size", [1, 2, 3, 7, 9, 16])
@pytest.mark.parametrize("cache", [True, False], ids=["cached", "streamed"])
def test_training_epochs_cover_the_split_once_at_any_rank_count(tmp_path: Path, size: int, cache: bool) -> None:
    data_dir = numbered_data(tmp_path)
    manifest = read_manifest(data_dir)
    total = manifest["splits"]["train"]["count"]
    plan = training_plan(manifest, size, 8, seed=7)
    epochs = [one_epoch(data_dir, rank, size, 8, plan.steps_per_epoch, cache) for rank in range(size)]
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


def test_streamed_input_crops_while_decoding_jpeg_and_png(tmp_path: Path) -> None:
    """Streamed training input (no cache) cuts the random crop window at decoding, for JPEG and PNG records alike:
    every batch is of the model's shape, the pixels stay 0..255, and a crop of a left-to-right ramp shows it."""
    from PIL import Image
    ramp = np.tile(np.linspace(0, 255, 96).astype(np.uint8), (64, 1))
    for name, suffix in (("a", "png"), ("b", "jpg")):
        (tmp_path / "folder" / name).mkdir(parents=True)
        for i in range(12):
            Image.fromarray(np.stack([ramp] * 3, -1)).save(tmp_path / "folder" / name / f"{i}.{suffix}")
    prepare(DataParams(dataset=f"folder:{tmp_path / 'folder'}", min_shards=1), tmp_path / "prepared", progress=False)
    manifest = read_manifest(tmp_path / "prepared")
    crops = rank_dataset(tmp_path / "prepared", manifest, "train", batch_size=4, training=True, input_shape=(32, 32, 3),
                         augment_ops=("crop",), cache=False)
    images = np.concatenate([batch.numpy() for batch, _ in crops.take(8)])
    assert images.shape == (32, 32, 32, 3) and images.min() >= 0 and images.max() <= 255
    left_edges = images[:, :, 0, 0].mean(axis=1)
    assert left_edges.max() > 10  # some windows start right of the ramp's dark left edge


@pytest.fixture(scope="module")
def numbered_tensors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tensor data whose every example says its own number: x [n, -n] (3 positions of 2), y [n, n / 2]."""
    folder = tmp_path_factory.mktemp("tensors")
    numbers = np.arange(300, dtype=np.float32)
    x = np.stack([np.stack([numbers, -numbers], 1)] * 3, 1)
    np.savez(folder / "numbered.npz", x=x, y=np.stack([numbers, numbers / 2], 1))
    prepare(DataParams(dataset=f"npz:{folder / 'numbered.npz'}", min_shards=5), folder / "prepared", progress=False)
    return folder / "prepared"


def tensor_numbers(dataset: Any, steps: int | None = None) -> list[int]:
    """The example numbers of the batches of a tensor dataset, checking that each x and y says the same number."""
    numbers = []
    for x, y in dataset.take(steps) if steps else dataset:
        assert x.dtype == tf.float32 and y.dtype == tf.float32 and x.shape[1:] == (3, 2) and y.shape[1:] == (2,)
        assert np.array_equal(x.numpy()[:, 2, 1], -y.numpy()[:, 0]) and np.array_equal(y[:, 0] / 2, y[:, 1])
        numbers += x.numpy()[:, 0, 0].astype(int).tolist()
    return numbers


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("cache", [True, False], ids=["cached", "streamed"])
def test_tensor_training_epochs_cover_the_split_once(numbered_tensors: Path, size: int, cache: bool) -> None:
    manifest = read_manifest(numbered_tensors)
    plan = training_plan(manifest, size, 8, seed=7)
    seen = [number for rank in range(size) for number in tensor_numbers(rank_dataset(
        numbered_tensors, manifest, "train", rank=rank, size=size, batch_size=8, training=True, seed=7 + rank,
        shard_seed=7, cache=cache, task="regression"), plan.steps_per_epoch)]
    assert len(seen) == len(set(seen)) == size * plan.steps_per_epoch * 8
    assert manifest["splits"]["train"]["count"] - len(seen) == sum(plan.dropped)


def test_two_ranks_evaluate_disjoint_complete_tensor_parts(numbered_tensors: Path) -> None:
    manifest = read_manifest(numbered_tensors)
    parts = [tensor_numbers(rank_dataset(numbered_tensors, manifest, "test", rank=rank, size=2, batch_size=7))
             for rank in (0, 1)]
    assert abs(len(parts[0]) - len(parts[1])) <= 1 and not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == sorted(tensor_numbers(rank_dataset(numbered_tensors, manifest, "test")))
    assert len(parts[0]) + len(parts[1]) == manifest["splits"]["test"]["count"]


def test_tensor_batches_are_float_features_with_class_ids_or_targets(numbered_tensors: Path, tmp_path: Path) -> None:
    from trainer.data import model_input_shape
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "points.npz", x=rng.normal(size=(50, 4)), y=rng.integers(0, 3, 50))
    prepare(DataParams(dataset=f"npz:{tmp_path / 'points.npz'}", min_shards=1), tmp_path / "p", progress=False)
    manifest = read_manifest(tmp_path / "p")
    assert model_input_shape(manifest, image_size=64) == (4,)  # image_size is for images only
    x, labels = next(iter(rank_dataset(tmp_path / "p", manifest, "train", batch_size=5, training=True)))
    assert (x.dtype, x.shape, labels.dtype, labels.shape) == (tf.float32, (5, 4), tf.int32, (5,))
    x, targets = next(iter(rank_dataset(tmp_path / "p", manifest, "test", batch_size=5, task="regression")))
    assert (targets.dtype, targets.shape) == (tf.float32, (5, 1))
    with pytest.raises(ValueError, match="not class ids"):
        rank_dataset(numbered_tensors, read_manifest(numbered_tensors), "test", task="classification")


def test_auto_cache_counts_tensor_features_as_float32() -> None:
    from trainer.data import cache_in_memory, value_bytes_of
    assert value_bytes_of({"kind": "tensor"}) == 4 and value_bytes_of({"image_shape": [8, 8, 1]}) == 1
    limit = (24 << 30) // (4 * 2)
    assert cache_in_memory("auto", limit // (1000 * 4), (10, 100), available=24 << 30, processes=2, value_bytes=4)
    assert not cache_in_memory("auto", limit // (1000 * 4) + 1, (10, 100), 24 << 30, 2, value_bytes=4)


def test_the_tf_data_service_hands_out_tensor_batches(numbered_tensors: Path) -> None:
    from trainer.data import service_dataset
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=address))  # noqa: F841 (kept running)
    manifest = read_manifest(numbered_tensors)
    dataset = service_dataset(numbered_tensors, manifest, dispatcher=address, job_name="tensors", batch_size=10,
                              seed=1, input_shape=(3, 2))
    total = manifest["splits"]["train"]["count"]
    numbers = tensor_numbers(dataset, total // 10)
    assert sorted(numbers) == sorted(set(numbers)) and len(numbers) == total // 10 * 10  # one epoch, no repeats
