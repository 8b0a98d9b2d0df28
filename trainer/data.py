"""Per-rank tf.data input pipeline over the prepared TFRecord shards.

this rank's share of the shards (trainer/sharding.py) -> parallel interleaved reads, then, for images,
- cached (evaluation, or a share that fits in memory): parse + decode (+ resize) -> cache -> seeded shuffle ->
  augmentation (training) -> batch -> float32 -> prefetch;
- streamed (training on a share too large to cache): seeded shuffle of the serialized records -> parse + decode
  of the crop window -> one resize -> augmentation -> batch -> prefetch;
and for tensor data (float features and targets) the same without decode, resize or augmentation: parsed in
batches, cached or streamed, shuffled and repeated alike.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from trainer.prepared_data import data_kind, data_task, feature_shape, feature_spec, shard_paths, tensor_feature_spec
from trainer.sharding import RankShare, rank_share

CROP_FRACTION = 0.875  # the random crop keeps 7/8 of each side (nvcnn_hvd's distortions)
PARSE_BATCH = 256  # tensor records parsed at once


def as_written(function: Callable) -> Callable:
    """A function tf.data traces as it is written: the pipeline's functions are graph code (tf.cond, no Python
    control flow on tensors), which autograph would otherwise rewrite from their source at every process start."""
    import tensorflow as tf
    return tf.autograph.experimental.do_not_convert(function)


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
    return pieces.interleave(as_written(lambda path, skip, take: tf.data.TFRecordDataset(path).skip(skip).take(take)),
                             cycle_length=max(1, min(8, len(share.pieces))), num_parallel_calls=tf.data.AUTOTUNE,
                             deterministic=not training)


def model_input_shape(manifest: dict[str, Any], image_size: int | None = None) -> tuple[int, ...]:
    """The shape of one example as the model sees it: for images (height, width, channels), image_size square when
    given, else the data's shape; for tensor data its feature shape (image_size does not apply)."""
    if data_kind(manifest) == "tensor":
        return feature_shape(manifest)
    height, width, channels = manifest["image_shape"]
    return (image_size, image_size, channels) if image_size else (height, width, channels)


def evaluation_records(data_dir: Path, manifest: dict[str, Any], split: str) -> Any:
    """The serialized records of a whole split in the order an evaluation (one process, rank_dataset) reads them."""
    return _records(data_dir, manifest, split, rank_share(manifest, split, 0, 1), False, 0)


def decode_image(encoded: Any, channels: int) -> Any:
    """Encoded image bytes (JPEG, PNG, GIF's first frame, BMP) -> uint8 [H, W, channels]: how the training reads
    its records and the SavedModel's bytes signature reads what it is sent. Decoded as stored, then converted:
    TensorFlow's BMP and GIF decoders give no grey, and its PNG and JPEG decoders convert each their own way."""
    import tensorflow as tf
    if channels not in (1, 3):
        return tf.io.decode_image(encoded, channels=channels, expand_animations=False)
    image = tf.io.decode_image(encoded, channels=0, expand_animations=False)
    colour = tf.shape(image)[-1] >= 3  # RGB or RGBA, else grey or grey with alpha

    def grey() -> Any:
        luma = tf.image.rgb_to_grayscale(tf.cast(image[..., :3], tf.float32))
        return tf.cast(tf.clip_by_value(tf.round(luma), 0, 255), tf.uint8)
    if channels == 1:
        image = tf.cond(colour, grey, lambda: image[..., :1])
    else:
        image = tf.cond(colour, lambda: image[..., :3], lambda: tf.image.grayscale_to_rgb(image[..., :1]))
    return tf.ensure_shape(image, [None, None, channels])


def decode_example(serialized: Any, channels: int) -> tuple[Any, Any]:
    """A serialized Example -> (uint8 image [H, W, channels], int32 label)."""
    import tensorflow as tf
    parsed = tf.io.parse_single_example(serialized, feature_spec())
    return decode_image(parsed["image/encoded"], channels), tf.cast(parsed["image/class/label"], tf.int32)


def sized_image(image: Any, shape: tuple[int, int, int], resize: bool) -> Any:
    """A decoded uint8 image as the model takes it: resized (bilinear, rounded back to uint8) to `shape` when
    `resize`, else checked to have it."""
    import tensorflow as tf
    if resize:
        image = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, shape[:2])), 0, 255), tf.uint8)
    return tf.ensure_shape(image, shape)


def _loader(shape: tuple[int, int, int], resize: bool) -> Any:
    """serialized Example -> (uint8 image of `shape`, label)."""
    def load(serialized: Any) -> tuple[Any, Any]:
        image, label = decode_example(serialized, shape[2])
        return sized_image(image, shape, resize), label
    return load


def augment(image: Any, shape: tuple[int, int, int], ops: tuple[str, ...]) -> Any:
    """nvcnn_hvd's training distortions, those named in `ops`, in this order: random crop resized back, flip,
    brightness, contrast (0..255 floats)."""
    import tensorflow as tf
    if "crop" in ops:
        crop = [max(1, int(shape[0] * CROP_FRACTION)), max(1, int(shape[1] * CROP_FRACTION)), shape[2]]
        image = tf.image.resize(tf.image.random_crop(image, crop), shape[:2])
    if "flip" in ops:
        image = tf.image.random_flip_left_right(image)
    if "brightness" in ops:
        image = tf.image.random_brightness(image, max_delta=32.0)
    if "contrast" in ops:
        image = tf.image.random_contrast(image, 0.8, 1.2)
    return tf.clip_by_value(image, 0.0, 255.0)


def decoded_bytes(records: int, shape: tuple[int, ...], value_bytes: int = 1) -> int:
    """Memory `records` decoded records take at the model's input shape: uint8 images (value_bytes 1) or float32
    features (4)."""
    return records * math.prod(shape) * value_bytes


def cache_in_memory(setting: str | bool, records: int, shape: tuple[int, ...], available: int,
                    processes: int, value_bytes: int = 1) -> bool:
    """Whether a rank keeps its decoded training share in memory: `auto` only when it fits well inside its part of
    the host's available memory (a quarter of it, shared by the host's processes). value_bytes: 1 for images,
    4 for tensor data (value_bytes_of)."""
    if setting != "auto":
        return bool(setting)
    return decoded_bytes(records, shape, value_bytes) <= available // (4 * max(1, processes))


def value_bytes_of(manifest: dict[str, Any]) -> int:
    """Bytes per value of the decoded data: uint8 images 1, float32 tensor data 4."""
    return 4 if data_kind(manifest) == "tensor" else 1


def rank_dataset(data_dir: Path, manifest: dict[str, Any], split: str, *, rank: int = 0, size: int = 1,
                 batch_size: int = 32, training: bool = False, seed: int = 0, shard_seed: int = 0,
                 input_shape: tuple[int, ...] | None = None, augment_ops: tuple[str, ...] = (),
                 cache: bool = True, task: str = "auto") -> Any:
    """Batched (float32 image 0..255 of input_shape, int32 label) of this rank's share of `split`; for tensor data
    (float32 features [B, *feature_shape], targets): int32 class ids [B] when `task` (data_task: auto is the
    data's own) is classification, float32 [B, k] for regression; no augmentation.

    Training: the shares are cut by shard_seed (the same on every rank; trainer/sharding.py), cached decoded (cache)
    or streamed (decoded afresh each epoch), shuffled by `seed`, repeated and augmented by augment_ops.
    Evaluation: the shares in manifest order, read once.
    """
    import tensorflow as tf
    share = rank_share(manifest, split, rank, size, shard_seed if training else None)
    records = _records(data_dir, manifest, split, share, training, seed)
    if data_kind(manifest) == "tensor":
        return _tensor_batches(records, manifest, data_task(manifest, task), batch_size, training, seed, cache)
    if training and not cache:
        return _streamed(records, manifest, input_shape, batch_size, seed, augment_ops)
    images, shape = _decoded(records, manifest, input_shape)
    if training:
        images = images.cache().shuffle(4096, seed=seed).repeat()
    batches = _batched(images, shape, batch_size, training, augment_ops if training else ())
    # One cast per batch, not per image: less tf.data work beside the training threads.
    return batches.map(as_written(_as_float), num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def tensor_parser(manifest: dict[str, Any], task: str) -> Callable[[Any], tuple[Any, Any]]:
    """A batch of serialized tensor records -> (float32 features [B, *feature_shape], targets): int32 class ids [B]
    for classification, float32 [B, k] for regression."""
    import tensorflow as tf
    spec, shape = tensor_feature_spec(manifest), list(feature_shape(manifest))

    def parse(serialized: Any) -> tuple[Any, Any]:
        parsed = tf.io.parse_example(serialized, spec)
        targets = parsed["y"]
        if task == "classification":
            targets = tf.cast(tf.round(targets[:, 0]), tf.int32)
        return tf.reshape(parsed["x"], [-1, *shape]), targets
    return as_written(parse)


def _tensor_examples(records: Any, manifest: dict[str, Any], task: str) -> Any:
    """(features, target) of each serialized record, parsed in batches (far fewer tf.data steps than one by one)."""
    import tensorflow as tf
    return records.batch(PARSE_BATCH).map(tensor_parser(manifest, task),
                                          num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def _tensor_batches(records: Any, manifest: dict[str, Any], task: str, batch_size: int, training: bool, seed: int,
                    cache: bool) -> Any:
    """Batches of tensor data: training cached (parsed once) or streamed (the serialized records shuffled), shuffled
    by `seed`, repeated, only full batches; evaluation read once in order."""
    import tensorflow as tf
    if training and not cache:
        batches = records.shuffle(4096, seed=seed).repeat().batch(batch_size, drop_remainder=True).map(
            tensor_parser(manifest, task), num_parallel_calls=tf.data.AUTOTUNE)
    elif training:
        examples = _tensor_examples(records, manifest, task).cache().shuffle(4096, seed=seed).repeat()
        batches = examples.batch(batch_size, drop_remainder=True)
    else:
        batches = records.batch(batch_size).map(tensor_parser(manifest, task), num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def service_dataset(data_dir: Path, manifest: dict[str, Any], *, dispatcher: str, job_name: str, batch_size: int,
                    seed: int, input_shape: tuple[int, ...], augment_ops: tuple[str, ...] = (),
                    task: str = "auto") -> Any:
    """Endless training batches of the whole split through the tf.data service, for consumers that take steps
    independently (parameter-server workers): per epoch the dispatcher hands every shard to one tf.data worker
    and every batch to one consumer of the job, so the consumers read disjoint parts that cover the split (the
    tf.data service's "distributed_epoch" mode, TensorFlow's way to exactly-once visitation with
    ParameterServerStrategy). Tensor data: as rank_dataset's, by `task`, without augmentation."""
    import tensorflow as tf
    share = rank_share(manifest, "train", 0, 1, seed)
    # A splittable source: one piece per shard, read in order; the tf.data worker shuffles what it is given.
    records = _records(data_dir, manifest, "train", share, False, seed)
    if data_kind(manifest) == "tensor":
        examples = _tensor_examples(records, manifest, data_task(manifest, task))
        batches = examples.shuffle(4096).batch(batch_size)  # the last one may be short
    else:
        images, shape = _decoded(records, manifest, input_shape)
        batches = _batched(images.shuffle(4096), shape, batch_size, False, augment_ops)  # the last may be short
    service = tf.data.experimental.service
    shared = batches.apply(service.distribute("distributed_epoch", f"grpc://{dispatcher}", job_name=job_name))
    # Each repetition is a new epoch of the same job, which the consumers again share; full batches are made
    # across the repetitions, so no record is dropped but the epoch's remainder.
    shared = shared.repeat().rebatch(batch_size, drop_remainder=True)
    return shared.map(as_written(_as_float), num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _streamed(records: Any, manifest: dict[str, Any], input_shape: tuple[int, ...] | None, batch_size: int,
              seed: int, augment_ops: tuple[str, ...]) -> Any:
    """Training batches decoded afresh every epoch (a split too large to cache): the small serialized records are
    shuffled, not decoded images, and a random crop is cut while decoding (only the window of a JPEG is decoded),
    so each image is resized once."""
    import tensorflow as tf
    shape = tuple(input_shape or manifest["image_shape"])
    crop = "crop" in augment_ops

    def load(serialized: Any) -> tuple[Any, Any]:
        parsed = tf.io.parse_single_example(serialized, feature_spec())
        image = _decoded_window(parsed["image/encoded"], parsed["image/format"], shape[2], crop)
        return tf.ensure_shape(tf.image.resize(image, shape[:2]), shape), tf.cast(parsed["image/class/label"], tf.int32)
    images = records.shuffle(4096, seed=seed).repeat().map(as_written(load), num_parallel_calls=tf.data.AUTOTUNE)
    later = tuple(op for op in augment_ops if op != "crop")
    if later:
        images = images.map(as_written(lambda image, label: (augment(image, shape, later), label)),
                            num_parallel_calls=tf.data.AUTOTUNE)
    return images.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _decoded_window(encoded: Any, image_format: Any, channels: int, crop: bool) -> Any:
    """The decoded image, or (crop) a random window of 7/8 of each side of it, as augment's crop takes."""
    import tensorflow as tf
    if not crop:
        return tf.io.decode_image(encoded, channels=channels, expand_animations=False)

    def window(height: Any, width: Any) -> Any:
        size = tf.maximum(1, tf.cast(tf.cast(tf.stack([height, width]), tf.float32) * CROP_FRACTION, tf.int32))
        corner = tf.cast(tf.random.uniform([2]) * tf.cast(tf.stack([height, width]) - size + 1, tf.float32), tf.int32)
        return tf.concat([tf.minimum(corner, tf.stack([height, width]) - size), size], 0)

    def jpeg() -> Any:
        full = tf.io.extract_jpeg_shape(encoded)
        # The fast integer DCT, as tf_cnn_benchmarks decodes ImageNet for training: the crop is random anyway.
        return tf.io.decode_and_crop_jpeg(encoded, window(full[0], full[1]), channels=channels,
                                          dct_method="INTEGER_FAST")

    def other() -> Any:
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        box = window(tf.shape(image)[0], tf.shape(image)[1])
        return image[box[0]:box[0] + box[2], box[1]:box[1] + box[3]]
    return tf.cond(tf.equal(image_format, "jpeg"), jpeg, other)


def _decoded(records: Any, manifest: dict[str, Any], input_shape: tuple[int, ...] | None) -> tuple[Any, tuple]:
    """(uint8 image of the model's input shape, label) of each serialized record, and that shape."""
    import tensorflow as tf
    shape = tuple(input_shape or manifest["image_shape"])
    resize = not manifest.get("uniform_size", True) or list(shape[:2]) != list(manifest["image_shape"][:2])
    return records.map(as_written(_loader(shape, resize)), num_parallel_calls=tf.data.AUTOTUNE), shape


def _batched(images: Any, shape: tuple[int, int, int], batch_size: int, full_only: bool,
             augment_ops: tuple[str, ...]) -> Any:
    """Augmented (augment_ops) batches; only full ones when full_only."""
    import tensorflow as tf
    if augment_ops:
        images = images.map(as_written(lambda image, label: (augment(tf.cast(image, tf.float32), shape, augment_ops),
                                                             label)), num_parallel_calls=tf.data.AUTOTUNE)
    return images.batch(batch_size, drop_remainder=full_only)


def _as_float(image: Any, label: Any) -> tuple[Any, Any]:
    import tensorflow as tf
    return tf.cast(image, tf.float32), label
