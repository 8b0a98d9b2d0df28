"""Per-rank tf.data input pipeline over the prepared TFRecord shards.

this rank's share of the shards (trainer/sharding.py) -> parallel interleaved reads -> parallel parse + decode
(+ resize) -> optional cache -> seeded shuffle -> augmentation (training) -> batch -> float32 -> prefetch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.prepared_data import feature_spec, shard_paths
from trainer.sharding import RankShare, rank_share


def rank_record_count(manifest: dict[str, Any], split: str, rank: int, size: int) -> int:
    """How many records of an evaluation split (validation, test) this rank reads in one pass."""
    return rank_share(manifest, split, rank, size).records


def _records(data_dir: Path, manifest: dict[str, Any], split: str, share: RankShare, training: bool,
             seed: int) -> Any:
    """The serialized records of one rank's share: its pieces read interleaved (in a new order every epoch when
    training)."""
    import tensorflow as tf
    paths = shard_paths(data_dir, manifest, split)
    pieces = tf.data.Dataset.from_tensor_slices((
        tf.constant([paths[piece.shard] for piece in share.pieces], tf.string),
        tf.constant([piece.skip for piece in share.pieces], tf.int64),
        tf.constant([piece.take for piece in share.pieces], tf.int64)))
    if training:
        pieces = pieces.shuffle(max(1, len(share.pieces)), seed=seed, reshuffle_each_iteration=True)
    return pieces.interleave(lambda path, skip, take: tf.data.TFRecordDataset(path).skip(skip).take(take),
                             cycle_length=max(1, min(8, len(share.pieces))), num_parallel_calls=tf.data.AUTOTUNE,
                             deterministic=not training)


def model_input_shape(manifest: dict[str, Any], image_size: int | None = None) -> tuple[int, int, int]:
    """(height, width, channels) the model sees: image_size square when given, else the data's shape."""
    height, width, channels = manifest["image_shape"]
    return (image_size, image_size, channels) if image_size else (height, width, channels)


def decode_example(serialized: Any, channels: int) -> tuple[Any, Any]:
    """A serialized Example -> (uint8 image [H, W, channels], int32 label)."""
    import tensorflow as tf
    parsed = tf.io.parse_single_example(serialized, feature_spec())
    image = tf.io.decode_image(parsed["image/encoded"], channels=channels, expand_animations=False)
    return image, tf.cast(parsed["image/class/label"], tf.int32)


def _sized(image: Any, shape: tuple[int, int, int], resize: bool) -> Any:
    import tensorflow as tf
    if resize:
        image = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, shape[:2])), 0, 255), tf.uint8)
    return tf.ensure_shape(image, shape)


def _loader(shape: tuple[int, int, int], resize: bool) -> Any:
    """serialized Example -> (uint8 image of `shape`, label)."""
    def load(serialized: Any) -> tuple[Any, Any]:
        image, label = decode_example(serialized, shape[2])
        return _sized(image, shape, resize), label
    return load


def augment(image: Any, shape: tuple[int, int, int], ops: tuple[str, ...]) -> Any:
    """nvcnn_hvd's training distortions, those named in `ops`, in this order: random crop resized back, flip,
    brightness, contrast (0..255 floats)."""
    import tensorflow as tf
    if "crop" in ops:
        crop = [max(1, int(shape[0] * 0.875)), max(1, int(shape[1] * 0.875)), shape[2]]
        image = tf.image.resize(tf.image.random_crop(image, crop), shape[:2])
    if "flip" in ops:
        image = tf.image.random_flip_left_right(image)
    if "brightness" in ops:
        image = tf.image.random_brightness(image, max_delta=32.0)
    if "contrast" in ops:
        image = tf.image.random_contrast(image, 0.8, 1.2)
    return tf.clip_by_value(image, 0.0, 255.0)


def decoded_bytes(records: int, shape: tuple[int, int, int]) -> int:
    """Memory the decoded uint8 images of `records` records take at the model's input shape."""
    return records * shape[0] * shape[1] * shape[2]


def cache_in_memory(setting: str | bool, records: int, shape: tuple[int, int, int], available: int,
                    processes: int) -> bool:
    """Whether a rank keeps its decoded training share in memory: `auto` only when it fits well inside its part of
    the host's available memory (a quarter of it, shared by the host's processes)."""
    if setting != "auto":
        return bool(setting)
    return decoded_bytes(records, shape) <= available // (4 * max(1, processes))


def rank_dataset(data_dir: Path, manifest: dict[str, Any], split: str, *, rank: int = 0, size: int = 1,
                 batch_size: int = 32, training: bool = False, seed: int = 0, shard_seed: int = 0,
                 input_shape: tuple[int, int, int] | None = None, augment_ops: tuple[str, ...] = (),
                 cache: bool = True) -> Any:
    """Batched (float32 image 0..255 of input_shape, int32 label) of this rank's share of `split`.

    Training: the shares are cut by shard_seed (the same on every rank; trainer/sharding.py), cached (optional),
    shuffled by `seed`, repeated and augmented by augment_ops. Evaluation: the shares in manifest order, read once.
    """
    import tensorflow as tf
    autotune = tf.data.AUTOTUNE
    share = rank_share(manifest, split, rank, size, shard_seed if training else None)
    records = _records(data_dir, manifest, split, share, training, seed)
    shape = tuple(input_shape or manifest["image_shape"])
    resize = not manifest.get("uniform_size", True) or list(shape[:2]) != list(manifest["image_shape"][:2])
    images = records.map(_loader(shape, resize), num_parallel_calls=autotune)
    if training:
        images = (images.cache() if cache else images).shuffle(4096, seed=seed).repeat()
    if training and augment_ops:
        images = images.map(lambda image, label: (augment(tf.cast(image, tf.float32), shape, augment_ops), label),
                            num_parallel_calls=autotune)
    batches = images.batch(batch_size, drop_remainder=training)
    # One cast per batch, not per image: less tf.data work beside the training threads.
    batches = batches.map(lambda image, label: (tf.cast(image, tf.float32), label), num_parallel_calls=autotune)
    return batches.prefetch(autotune)
