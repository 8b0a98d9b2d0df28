"""The SavedModel's `serving_bytes` signature, as TensorFlow Serving's image classifiers take their input: a batch of
encoded images (JPEG, PNG, GIF's first frame or BMP; any size) -> each decoded, resized and cast exactly as the
training's input pipeline does (trainer/data.py: decode_image, sized_image) -> `classes` (the class names),
`scores` (each class's probability), `top_k` (the indices of the best classes) and `errors`.

An item that is not a usable image (empty, over MAX_IMAGE_BYTES, not one of those formats, declaring more than
MAX_IMAGE_PIXELS in its header, truncated, corrupt or an encoding TensorFlow's decoders do not read, smaller than
MIN_IMAGE_SIDE on a side) gets its reason in `errors`, an empty class, zero scores and top_k of -1; the other items of
the batch are answered as usual.

The size an image declares is read from its header before anything is decoded (a decoder allocates what the header
says: 1.2 MB of PNG declaring 20000x20000 pixels took 7 GB and 11 s), twice over the same steps: in Python
(declared_size: the model server's check, before its images reach TensorFlow) and in graph ops (declared_sizes: the
signature's own, wherever the SavedModel is served).
"""
from __future__ import annotations

from typing import Any, Callable

BYTES_SIGNATURE = "serving_bytes"
MAX_IMAGE_BYTES = 10 * 2**20  # larger than any photo a classifier of this kind is sent
MIN_IMAGE_SIDE = 4  # pixels; a smaller image holds nothing a classifier can tell
TOP_K = 5
UNDECODABLE = "not decodable: truncated, corrupt or of a kind TensorFlow does not read"
FORMAT_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")  # JPEG, PNG, GIF, BMP
MAX_IMAGE_PIXELS = 2048 * 2048  # the default of serving.max_image_pixels (tasks/params.py), and the signature's
# limit (baked at export, as MAX_IMAGE_BYTES): 4.2 megapixels, a 2048x2048 image (12 MB decoded as RGB)
MAX_HEADER_STEPS = 4096  # JPEG markers before its frame's size, GIF blocks over its frames' sizes: read no further
UNDECLARED = (-1, -1)  # (width, height) of a JPEG or GIF whose size is not found within MAX_HEADER_STEPS
UNDECLARED_REASON = (f"its size is not declared within its first {MAX_HEADER_STEPS} markers (JPEG) or blocks (GIF, "
                     "about 1 MB): not decoded (send a GIF's first frame, or a PNG)")
JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOF0..SOF15 but DHT, JPG and DAC


PIXELS_OVER = "pixels, over serving.max_image_pixels"


def pixels_reason(width: int, height: int, max_pixels: int) -> str:
    """Why an image declaring width x height pixels is refused."""
    return f"declares {width}x{height} {PIXELS_OVER} {max_pixels}"


def window(data: bytes, start: int, count: int) -> bytes:
    """`count` bytes of `data` from `start`, zeros past its end."""
    return data[start:start + count].ljust(count, b"\0")


def number(data: bytes, start: int, count: int, little: bool = False) -> int:
    return int.from_bytes(data[start:start + count], "little" if little else "big")


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a JPEG's frame header (SOF0..SOF15), walking its markers from the start."""
    position = 2
    for _ in range(MAX_HEADER_STEPS):
        head = window(data, position, 9)
        if head[0] != 0xFF or head[1] in (0xD9, 0xDA):  # corrupt, or the image's end or scan before a frame
            return 0, 0
        if head[1] in JPEG_FRAMES:
            return number(head, 7, 2), number(head, 5, 2)
        position += 1 if head[1] == 0xFF else 2 if head[1] == 0x01 or 0xD0 <= head[1] <= 0xD7 else \
            2 + number(head, 2, 2)
    return UNDECLARED


def gif_size(data: bytes) -> tuple[int, int]:
    """The largest width and height of a GIF's logical screen and every frame's image descriptor (TensorFlow's
    decoder reads every frame into a canvas of that size), walking its blocks."""
    width, height, flags = number(data, 6, 2, True), number(data, 8, 2, True), window(data, 10, 1)[0]
    position, in_blocks = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0), True
    for _ in range(MAX_HEADER_STEPS):
        head = window(data, position, 10)
        if not in_blocks:  # a sub-block of an extension or image data: its size, then it; 0 ends them
            position, in_blocks = position + 1 + head[0], head[0] == 0
        elif head[0] == 0x2C:  # an image descriptor, its local colour table and LZW code size, then data
            width, height = max(width, number(head, 5, 2, True)), max(height, number(head, 7, 2, True))
            position += 11 + (3 << ((head[9] & 7) + 1) if head[9] & 0x80 else 0)
            in_blocks = False
        elif head[0] == 0x21:  # an extension: its label, then sub-blocks
            position, in_blocks = position + 2, False
        else:  # the trailer, the end of the bytes or something else: no more frames
            return width, height
    return UNDECLARED


def bmp_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a BMP's BITMAPCOREHEADER (12 bytes) or BITMAPINFOHEADER (and its successors)."""
    head = window(data, 0, 26)
    if number(head, 14, 4, True) == 12:
        return number(head, 18, 2, True), number(head, 20, 2, True)
    return tuple(abs(int.from_bytes(head[at:at + 4], "little", signed=True)) for at in (18, 22))  # type: ignore


def declared_size(data: bytes) -> tuple[int, int]:
    """(width, height) an encoded image's header declares (PNG's IHDR, JPEG's frame, GIF's screen and frames, BMP's
    info header); (0, 0) when it declares none (not one of those formats, cut short: its decoding fails), UNDECLARED
    when a JPEG or GIF is not read to its size within MAX_HEADER_STEPS."""
    head = window(data, 0, 24)
    if head.startswith(FORMAT_MAGIC[1]):
        return (number(head, 16, 4), number(head, 20, 4)) if head[12:16] == b"IHDR" else (0, 0)
    if head.startswith(FORMAT_MAGIC[0]):
        return jpeg_size(data)
    if head[:6] in FORMAT_MAGIC[2:4]:
        return gif_size(data)
    return bmp_size(data) if head.startswith(FORMAT_MAGIC[4]) else (0, 0)


def size_refusal(data: bytes, max_pixels: int) -> str:
    """Why an encoded image is refused for the size its header declares ('' when it is not)."""
    width, height = declared_size(data)
    if (width, height) == UNDECLARED:
        return UNDECLARED_REASON
    return pixels_reason(width, height, max_pixels) if width * height > max_pixels else ""


def windows(encoded: Any, start: Any, count: int) -> Any:
    """int32 [N, count]: each item's `count` bytes from its `start` (int32 [N]), zeros past its end (window's)."""
    import tensorflow as tf
    start = tf.minimum(start, tf.strings.length(encoded))
    piece = tf.strings.substr(encoded, start, tf.fill(tf.shape(start), count))
    padded = tf.strings.substr(tf.strings.join([piece, b"\0" * count]), 0, count)
    return tf.reshape(tf.cast(tf.io.decode_raw(padded, tf.uint8), tf.int32), [-1, count])


def numbers(head: Any, start: int, count: int, little: bool = False) -> Any:
    """int64 [N]: the unsigned numbers of `count` bytes at `start` of each row of windows' bytes (number's)."""
    import tensorflow as tf
    value = tf.zeros_like(head[:, 0], tf.int64)
    for at in (reversed(range(start, start + count)) if little else range(start, start + count)):
        value = value * 256 + tf.cast(head[:, at], tf.int64)
    return value


def graph_jpeg_sizes(encoded: Any, jpeg: Any) -> Any:
    """int64 [N, 2]: jpeg_size of each item where `jpeg`, zeros elsewhere, all items' markers walked at once."""
    import tensorflow as tf

    def step(position: Any, size: Any, done: Any) -> tuple[Any, Any, Any]:
        head = windows(encoded, position, 9)
        marker = head[:, 1]
        end = (head[:, 0] != 0xFF) | (marker == 0xD9) | (marker == 0xDA)
        frame = ~end & tf.reduce_any(tf.stack([marker == code for code in sorted(JPEG_FRAMES)]), axis=0)
        alone = (marker == 0x01) | ((marker >= 0xD0) & (marker <= 0xD7))
        segment = tf.cast(numbers(head, 2, 2), tf.int32)
        moved = tf.where(marker == 0xFF, position + 1, tf.where(alone, position + 2, position + 2 + segment))
        found = tf.stack([numbers(head, 7, 2), numbers(head, 5, 2)], axis=1)
        return (tf.where(done, position, moved), tf.where((frame & ~done)[:, None], found, size),
                done | end | frame)
    start = (tf.fill(tf.shape(jpeg), 2), tf.zeros([tf.size(jpeg), 2], tf.int64), ~jpeg)
    _, size, done = tf.while_loop(lambda position, size, done: tf.reduce_any(~done), step, start,
                                  maximum_iterations=MAX_HEADER_STEPS)
    return tf.where(done[:, None], size, tf.constant(UNDECLARED, tf.int64))


def graph_gif_sizes(encoded: Any, gif: Any) -> Any:
    """int64 [N, 2]: gif_size of each item where `gif`, zeros elsewhere, all items' blocks walked at once."""
    import tensorflow as tf

    def table(flags: Any) -> Any:  # the bytes of a colour table its flags declare
        return tf.where(flags & 0x80 != 0, 3 * tf.bitwise.left_shift(2, flags & 7), 0)

    def step(position: Any, in_blocks: Any, size: Any, done: Any) -> tuple[Any, Any, Any, Any]:
        head = windows(encoded, position, 10)
        image, extension = in_blocks & (head[:, 0] == 0x2C), in_blocks & (head[:, 0] == 0x21)
        found = tf.stack([numbers(head, 5, 2, True), numbers(head, 7, 2, True)], axis=1)
        moved = tf.where(image, position + 11 + table(head[:, 9]),
                         tf.where(extension, position + 2, position + 1 + head[:, 0]))
        blocks = tf.where(image | extension, False, tf.where(in_blocks, True, head[:, 0] == 0))
        keep = done | (in_blocks & ~image & ~extension)
        return (tf.where(keep, position, moved), tf.where(keep, in_blocks, blocks),
                tf.where((image & ~done)[:, None], tf.maximum(size, found), size), keep)
    screen = windows(encoded, tf.zeros(tf.shape(gif), tf.int32), 13)
    start = (13 + table(screen[:, 10]), tf.fill(tf.shape(gif), True),
             tf.where(gif[:, None], tf.stack([numbers(screen, 6, 2, True), numbers(screen, 8, 2, True)], axis=1), 0),
             ~gif)
    _, _, size, done = tf.while_loop(lambda *state: tf.reduce_any(~state[3]), step, start,
                                     maximum_iterations=MAX_HEADER_STEPS)
    return tf.where(done[:, None], size, tf.constant(UNDECLARED, tf.int64))


def declared_sizes(encoded: Any) -> Any:
    """int64 [N, 2]: declared_size of each item, in graph ops."""
    import tensorflow as tf
    head = windows(encoded, tf.zeros(tf.shape(encoded), tf.int32), 26)
    kind = [tf.strings.substr(encoded, 0, len(magic)) == magic for magic in FORMAT_MAGIC]
    png = kind[1] & tf.reduce_all(tf.stack([head[:, 12 + at] == code for at, code in enumerate(b"IHDR")]), axis=0)
    core = numbers(head, 14, 4, True) == 12

    def signed(at: int) -> Any:
        value = numbers(head, at, 4, True)
        return tf.abs(tf.where(value >= 2**31, value - 2**32, value))
    bmp = tf.stack([tf.where(core, numbers(head, 18, 2, True), signed(18)),
                    tf.where(core, numbers(head, 20, 2, True), signed(22))], axis=1)
    sizes = tf.where(png[:, None], tf.stack([numbers(head, 16, 4), numbers(head, 20, 4)], axis=1),
                     tf.where(kind[4][:, None], bmp, 0))
    return sizes + graph_jpeg_sizes(encoded, kind[0]) + graph_gif_sizes(encoded, kind[2] | kind[3])


def unreadable(encoded: Any, max_pixels: int = MAX_IMAGE_PIXELS) -> Any:
    """Per item: why its bytes cannot be an image, before decoding (an empty string when they may be)."""
    import tensorflow as tf
    sizes = tf.strings.length(encoded)
    known = tf.reduce_any(tf.stack([tf.strings.substr(encoded, 0, len(magic)) == magic for magic in FORMAT_MAGIC]),
                          axis=0)
    too_large = tf.strings.join([tf.strings.as_string(sizes), f" bytes: over the limit of {MAX_IMAGE_BYTES}"])
    declared = declared_sizes(tf.where(known & (sizes <= MAX_IMAGE_BYTES), encoded, ""))
    too_many = tf.strings.join(["declares ", tf.strings.as_string(declared[:, 0]), "x",
                                tf.strings.as_string(declared[:, 1]), f" {PIXELS_OVER} {max_pixels}"])
    oversized = tf.where(declared[:, 0] < 0, UNDECLARED_REASON,
                         tf.where(declared[:, 0] * declared[:, 1] > max_pixels, too_many, ""))
    return tf.where(sizes == 0, "empty: no image bytes",
                    tf.where(sizes > MAX_IMAGE_BYTES, too_large,
                             tf.where(known, oversized, "not an image: neither JPEG, PNG, GIF nor BMP")))


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
