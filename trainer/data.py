"""Per-rank tf.data input pipeline over the prepared TFRecord shards."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.records import feature_spec, shard_paths


def rank_shards(manifest: dict[str, Any], split: str, rank: int, size: int) -> tuple[list[int], bool]:
    """Indices of the shards this rank reads, and whether it must further split them by record.

    With at least as many shards as ranks, ranks split by file; otherwise all read every shard
    and keep every size-th record.
    """
    count = len(manifest["splits"][split]["shards"])
    if count >= size:
        return list(range(rank, count, size)), False
    return list(range(count)), True


def rank_record_count(manifest: dict[str, Any], split: str, rank: int, size: int) -> int:
    """How many records of `split` this rank sees in one pass."""
    indices, by_record = rank_shards(manifest, split, rank, size)
    if by_record:
        total = manifest["splits"][split]["count"]
        return len(range(rank, total, size))
    return sum(manifest["splits"][split]["shards"][i]["count"] for i in indices)


def decode_example(serialized: Any, image_shape: tuple[int, int, int]) -> tuple[Any, Any]:
    """A serialized Example -> (float32 image in 0..255 of image_shape, int32 label)."""
    import tensorflow as tf
    parsed = tf.io.parse_single_example(serialized, feature_spec())
    image = tf.io.decode_image(parsed["image/encoded"], channels=image_shape[2], expand_animations=False)
    image = tf.ensure_shape(image, image_shape)
    return tf.cast(image, tf.float32), tf.cast(parsed["image/class/label"], tf.int32)


def rank_dataset(data_dir: Path, manifest: dict[str, Any], split: str, *, rank: int = 0, size: int = 1,
                 batch_size: int = 32, training: bool = False, seed: int = 0) -> Any:
    """Batched (image, label) dataset of this rank's part of `split`; repeated and shuffled when training."""
    import tensorflow as tf
    autotune = tf.data.AUTOTUNE
    paths = shard_paths(data_dir, manifest, split)
    indices, by_record = rank_shards(manifest, split, rank, size)
    files = tf.data.Dataset.from_tensor_slices([paths[i] for i in indices])
    if training:
        files = files.shuffle(len(indices), seed=seed, reshuffle_each_iteration=True)
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(indices)),
                               num_parallel_calls=autotune, deterministic=not training)
    if by_record:
        records = records.shard(size, rank)
    image_shape = tuple(manifest["image_shape"])
    examples = records.map(lambda s: decode_example(s, image_shape), num_parallel_calls=autotune)
    if training:
        examples = examples.cache().shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
    return examples.batch(batch_size, drop_remainder=training).prefetch(autotune)
