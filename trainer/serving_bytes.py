"""The SavedModel's `serving_bytes` signature, as TensorFlow Serving's image classifiers take their input: a batch of
encoded images (JPEG, PNG, GIF's first frame or BMP; any size) -> each decoded, resized and cast exactly as the
training's input pipeline does (trainer/data.py: decode_image, sized_image) -> `classes` (the class names),
`scores` (each class's probability), `top_k` (the indices of the best classes) and `errors`.

An item that is not a usable image (empty, over MAX_IMAGE_BYTES, not one of those formats, truncated, corrupt or an
encoding TensorFlow's decoders do not read, smaller than MIN_IMAGE_SIDE on a side) gets its reason in `errors`, an
empty class, zero scores and top_k of -1; the other items of the batch are answered as usual.
"""
from __future__ import annotations

from typing import Any, Callable

BYTES_SIGNATURE = "serving_bytes"
MAX_IMAGE_BYTES = 10 * 2**20  # larger than any photo a classifier of this kind is sent
MIN_IMAGE_SIDE = 4  # pixels; a smaller image holds nothing a classifier can tell
TOP_K = 5
UNDECODABLE = "not decodable: truncated, corrupt or of a kind TensorFlow does not read"
FORMAT_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")  # JPEG, PNG, GIF, BMP


def unreadable(encoded: Any) -> Any:
    """Per item: why its bytes cannot be an image, before decoding (an empty string when they may be)."""
    import tensorflow as tf
    sizes = tf.strings.length(encoded)
    known = tf.reduce_any(tf.stack([tf.strings.substr(encoded, 0, len(magic)) == magic for magic in FORMAT_MAGIC]),
                          axis=0)
    too_large = tf.strings.join([tf.strings.as_string(sizes), f" bytes: over the limit of {MAX_IMAGE_BYTES}"])
    return tf.where(sizes == 0, "empty: no image bytes",
                    tf.where(sizes > MAX_IMAGE_BYTES, too_large,
                             tf.where(known, "", "not an image: neither JPEG, PNG, GIF nor BMP")))


def loaded_item(shape: tuple[int, int, int]) -> Callable[[Any, Any], tuple[Any, Any, Any]]:
    """(index, encoded image) -> (index, uint8 image of `shape`, [height, width] as sent), as the training reads it."""
    import tensorflow as tf

    from trainer.data import decode_image, sized_image

    def load(index: Any, data: Any) -> tuple[Any, Any, Any]:
        image = decode_image(data, shape[2])
        return index, sized_image(image, shape, resize=True), tf.shape(image)[:2]
    return load


def decoded_items(encoded: Any, readable: Any, shape: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """(indices, uint8 images of `shape`, [height, width] as sent) of the readable items that decode; an item whose
    decoding fails (truncated, corrupt) is left out, not the batch. tf.data's ignore_errors is what can leave an
    item out: about 15 ms a call here, against 0.2 ms for decoded_strictly."""
    import tensorflow as tf

    from trainer.data import as_written
    indices = tf.where(readable)[:, 0]

    def gather(state: tuple[Any, Any, Any], item: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        return tuple(tf.concat([kept, new[None]], 0) for kept, new in zip(state, item))
    items = tf.data.Dataset.from_tensor_slices((indices, tf.gather(encoded, indices)))
    options = tf.data.Options()  # one small batch per call: no graph rewrites, no tuning per call
    options.experimental_optimization.apply_default_optimizations = False
    options.autotune.enabled = False
    items = items.map(as_written(loaded_item(shape))).ignore_errors().with_options(options)
    empty = (tf.zeros([0], tf.int64), tf.zeros([0, *shape], tf.uint8), tf.zeros([0, 2], tf.int32))
    return items.reduce(empty, as_written(gather))


def decoded_strictly(encoded: Any, readable: Any, shape: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """decoded_items' answer when every readable item decodes; an item that does not fails the whole call (then
    decoded_items is the one to ask)."""
    import tensorflow as tf
    indices = tf.where(readable)[:, 0]
    specs = (tf.TensorSpec([], tf.int64), tf.TensorSpec(shape, tf.uint8), tf.TensorSpec([2], tf.int32))
    return tf.map_fn(lambda item: loaded_item(shape)(*item), (indices, tf.gather(encoded, indices)),
                     fn_output_signature=specs)


Decoder = Callable[[Any, Any, tuple[int, int, int]], tuple[Any, Any, Any]]


def item_errors(encoded: Any, shape: tuple[int, int, int], decode: Decoder = decoded_items) -> tuple[Any, Any, Any]:
    """(per item: why it cannot be classified, else an empty string; indices of the usable items; their images)."""
    import tensorflow as tf
    errors = unreadable(encoded)
    indices, images, sides = decode(encoded, tf.equal(errors, ""), shape)
    decoded = tf.scatter_nd(indices[:, None], tf.ones_like(indices, tf.bool), tf.shape(encoded, tf.int64))
    errors = tf.where(tf.equal(errors, "") & ~decoded, UNDECODABLE, errors)
    small = tf.reduce_any(sides < MIN_IMAGE_SIDE, axis=1)
    sizes = tf.strings.join([tf.strings.as_string(sides[:, 0]), "x", tf.strings.as_string(sides[:, 1])])
    said = tf.strings.join([sizes, f" pixels: smaller than {MIN_IMAGE_SIDE}x{MIN_IMAGE_SIDE}"])
    errors = tf.tensor_scatter_nd_update(errors, tf.boolean_mask(indices, small)[:, None], tf.boolean_mask(said, small))
    return errors, tf.boolean_mask(indices, ~small), tf.boolean_mask(images, ~small)


def classified(images_bytes: Any, shape: tuple[int, int, int], class_names: list[str],
               probabilities_of: Callable[[Any], Any], decode: Decoder = decoded_items) -> dict[str, Any]:
    """The `serving_bytes` outputs for a batch of encoded images, the classifier's probabilities of float32 images
    (0..255) of `shape` given by probabilities_of."""
    import tensorflow as tf
    errors, indices, images = item_errors(images_bytes, shape, decode)
    probabilities = tf.cond(  # a batch without a usable image: no call (oneDNN's convolutions fail on none)
        tf.size(indices) > 0, lambda: tf.cast(probabilities_of(tf.cast(images, tf.float32)), tf.float32),
        lambda: tf.zeros([0, len(class_names)], tf.float32))
    scores = tf.scatter_nd(indices[:, None], probabilities, [tf.shape(images_bytes)[0], len(class_names)])
    usable = tf.equal(errors, "")
    best = tf.math.top_k(scores, k=min(TOP_K, len(class_names))).indices
    return {"classes": tf.where(usable, tf.gather(tf.constant(class_names), best[:, 0]), ""), "scores": scores,
            "top_k": tf.where(usable[:, None], best, -1), "errors": errors}


def bytes_signature(model: Any, shape: tuple[int, int, int], class_names: list[str]) -> Any:
    """The `serving_bytes` function of a Keras model whose input is float32 0..255 images of `shape`."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images_bytes")], autograph=False)
    def serve_bytes(images_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return classified(images_bytes, shape, class_names, lambda images: model(images, training=False))
    return serve_bytes
