"""The SavedModel's bytes signature: encoded images in, class names and scores out, read as the training reads its
records; a wrong item gets its reason, the rest of its batch its answer."""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.helpers import read_split
from trainer.model_outputs import SIGNATURE
from trainer.serving_bytes import BYTES_SIGNATURE, MAX_IMAGE_BYTES

CLASS_NAMES = [f"digit {index}" for index in range(10)]


@dataclass(frozen=True)
class Signatures:
    floats: Any  # serving_default: float32 images of the model's input -> probabilities
    encoded: Any  # serving_bytes
    images: np.ndarray  # the test split, uint8 [N, 8, 8]
    labels: np.ndarray


@pytest.fixture(scope="module")
def signatures(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Signatures:
    """A small CNN trained a few epochs on the digits, saved as the training's lead saves it, loaded back."""
    import tensorflow as tf

    from trainer.model_outputs import write_savedmodel
    from trainer.models import build_model
    model = build_model("small_cnn", (8, 8, 1), 10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    train_images, train_labels = read_split(digits_data, "train")
    model.fit(train_images, train_labels, epochs=8, batch_size=32, verbose=0)
    path = tmp_path_factory.mktemp("savedmodel") / "savedmodel"
    write_savedmodel(model, path, CLASS_NAMES)
    loaded = tf.saved_model.load(str(path))
    images, labels = read_split(digits_data, "test")
    return Signatures(loaded.signatures[SIGNATURE], loaded.signatures[BYTES_SIGNATURE],
                      images[..., 0].astype(np.uint8), labels)


def encoded(image: np.ndarray, image_format: str, **options: Any) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image).save(out, image_format, **options)
    return out.getvalue()


def classify(signatures: Signatures, items: list[bytes]) -> dict[str, np.ndarray]:
    import tensorflow as tf
    return {name: value.numpy() for name, value in signatures.encoded(images_bytes=tf.constant(items)).items()}


def test_png_bytes_are_classified_as_their_pixels_are_and_jpeg_bytes_within_its_loss(signatures: Signatures) -> None:
    import tensorflow as tf
    floats = signatures.floats(images=tf.constant(signatures.images[..., None], tf.float32))["probabilities"].numpy()
    png = classify(signatures, [encoded(image, "PNG") for image in signatures.images])
    assert np.allclose(png["scores"], floats, atol=1e-5) and set(png["errors"]) == {b""}
    assert [name.decode() for name in png["classes"]] == [CLASS_NAMES[index] for index in floats.argmax(axis=1)]
    assert (png["top_k"][:, 0] == floats.argmax(axis=1)).all() and png["top_k"].shape == (len(floats), 5)
    assert (floats.argmax(axis=1) == signatures.labels).mean() >= 0.8  # a model that tells the digits apart
    jpeg = classify(signatures, [encoded(image, "JPEG", quality=95) for image in signatures.images])
    assert (jpeg["top_k"][:, 0] == floats.argmax(axis=1)).mean() >= 0.95 and set(jpeg["errors"]) == {b""}


def test_an_image_of_another_size_and_mode_is_resized_and_converted_as_the_training_does(
        signatures: Signatures) -> None:
    import tensorflow as tf

    from trainer.data import sized_image
    large = np.kron(signatures.images[:20], np.ones((4, 4), np.uint8))  # 32x32, each pixel 4x4
    rgb = np.stack([signatures.images[:20]] * 3, axis=-1)  # RGB: read as one channel
    resized = tf.map_fn(lambda image: sized_image(image, (8, 8, 1), resize=True), tf.constant(large[..., None]))
    expected = signatures.floats(images=tf.cast(resized, tf.float32))["probabilities"].numpy()
    assert np.allclose(classify(signatures, [encoded(image, "PNG") for image in large])["scores"], expected,
                       atol=1e-5)
    grey = classify(signatures, [encoded(image, "PNG") for image in signatures.images[:20]])["scores"]
    assert np.allclose(classify(signatures, [encoded(image, "PNG") for image in rgb])["scores"], grey, atol=0.02)


def test_each_wrong_item_gets_its_reason_and_the_rest_of_the_batch_its_answer(signatures: Signatures) -> None:
    digit = encoded(signatures.images[0], "PNG")
    colour = np.stack([signatures.images[1]] * 3, axis=-1)
    items = [digit, b"", b"not an image at all", encoded(np.zeros((1, 1), np.uint8), "PNG"), digit[:40],
             b"\x89PNG\r\n\x1a\n" + bytes(MAX_IMAGE_BYTES + 1), encoded(colour, "BMP"),
             encoded(signatures.images[2], "GIF")]
    answer = classify(signatures, items)
    assert [error.decode() for error in answer["errors"]] == [
        "", "empty: no image bytes", "not an image: neither JPEG, PNG, GIF nor BMP", "1x1 pixels: smaller than 4x4",
        "not decodable: truncated, corrupt or of a kind TensorFlow does not read",
        f"{MAX_IMAGE_BYTES + 9} bytes: over the limit of {MAX_IMAGE_BYTES}", "", ""]
    assert answer["classes"][0] and all(answer["classes"][-2:]) and not any(answer["classes"][1:-2])
    assert (answer["scores"][1:-2] == 0).all() and (answer["top_k"][1:-2] == -1).all()
    alone = classify(signatures, [digit])
    assert np.allclose(alone["scores"][0], answer["scores"][0], atol=1e-6)  # its answer, whatever its batch held


def test_a_batch_without_a_usable_image_is_answered_item_by_item(tmp_path: Path) -> None:
    """The pipeline's CNN is not called on an empty batch (oneDNN's convolutions fail on one)."""
    import tensorflow as tf

    from trainer.model_outputs import write_savedmodel
    from trainer.models import build_model
    write_savedmodel(build_model("cnn", (8, 8, 1), 10), tmp_path / "savedmodel", CLASS_NAMES)
    bytes_signature = tf.saved_model.load(str(tmp_path / "savedmodel")).signatures[BYTES_SIGNATURE]
    answer = bytes_signature(images_bytes=tf.constant([b"", b"not an image at all"]))
    assert [error.decode() for error in answer["errors"].numpy()] == [
        "empty: no image bytes", "not an image: neither JPEG, PNG, GIF nor BMP"]
    assert list(answer["classes"].numpy()) == [b"", b""] and (answer["top_k"].numpy() == -1).all()


def png_declaring(width: int, height: int) -> bytes:
    """A valid PNG of zeros (RGB), width x height pixels: 1.2 MB at 20000x20000, 1.2 GB decoded."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    compressor, row, parts = zlib.compressobj(9), bytes(1 + 3 * width), []
    for _ in range(height):
        parts.append(compressor.compress(row))
    parts.append(compressor.flush())
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b""))


def patched(data: bytes, at: int, packed: bytes) -> bytes:
    return data[:at] + packed + data[at + len(packed):]


def bmp_core(width: int, height: int) -> bytes:
    """A 24-bit BMP with a BITMAPCOREHEADER (OS/2's 12 bytes: PIL writes only BITMAPINFOHEADER)."""
    import struct
    rows = bytes((3 * width + 3) // 4 * 4) * height
    return b"BM" + struct.pack("<IHHI", 26 + len(rows), 0, 0, 26) + struct.pack("<IHHHH", 12, width, height, 1, 24) \
        + rows


def header_cases() -> dict[str, tuple[bytes, bytes]]:
    """Per format: (a small image, the same with its header's declared size made 20000x20000)."""
    import struct
    grey = np.arange(30 * 20, dtype=np.uint8).reshape(20, 30)
    png, gif, bmp = encoded(grey, "PNG"), encoded(grey, "GIF"), encoded(np.stack([grey] * 3, -1), "BMP")
    jpeg = encoded(np.stack([grey] * 3, -1), "JPEG", exif=b"Exif\0\0" + bytes(300))  # APP1 before the frame
    progressive = encoded(grey, "JPEG", progressive=True)
    frames = [Image.fromarray(grey + shade) for shade in (0, 60, 120)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    animated = out.getvalue()
    second = animated.index(b"\x2c", animated.index(b"\x2c") + 10)  # the second frame's image descriptor
    big16, big32 = struct.pack(">HH", 20000, 20000), struct.pack(">II", 20000, 20000)
    return {"png": (png, patched(png, 16, big32)),
            "jpeg": (jpeg, patched(jpeg, jpeg.index(b"\xff\xc0") + 5, big16)),
            "progressive jpeg": (progressive, patched(progressive, progressive.index(b"\xff\xc2") + 5, big16)),
            "gif screen": (gif, patched(gif, 6, big16[::-1])),
            "gif frame": (animated, patched(animated, second + 5, big16[::-1])),
            "bmp": (bmp, patched(bmp, 18, struct.pack("<ii", 20000, -20000))),  # top-down: a negative height
            "bmp core": (bmp_core(30, 20), patched(bmp_core(30, 20), 18, big16[::-1]))}


@pytest.mark.parametrize("case", list(header_cases()))
def test_the_header_s_declared_size_is_read_before_decoding_in_python_and_in_the_graph(case: str) -> None:
    import tensorflow as tf

    from trainer.serving_bytes import declared_size, declared_sizes, size_refusal, unreadable
    small, large = header_cases()[case]
    assert declared_size(small) == (30, 20) and declared_size(large) == (20000, 20000)
    assert declared_sizes(tf.constant([small, large, b"not an image"])).numpy().tolist() == [
        [30, 20], [20000, 20000], [0, 0]]
    reason = "declares 20000x20000 pixels, over serving.max_image_pixels 4194304"
    assert size_refusal(small, 4_194_304) == "" and size_refusal(large, 4_194_304) == reason
    assert [error.decode() for error in unreadable(tf.constant([small, large])).numpy()] == ["", reason]


def test_a_jpeg_that_does_not_reach_its_size_within_the_steps_read_is_refused() -> None:
    import tensorflow as tf

    from trainer.serving_bytes import MAX_HEADER_STEPS, UNDECLARED_REASON, size_refusal, unreadable
    jpeg = encoded(np.zeros((8, 8, 3), np.uint8), "JPEG")
    padded = jpeg[:2] + b"\xff\xfe\x00\x02" * MAX_HEADER_STEPS + jpeg[2:]  # empty comments before the frame
    assert size_refusal(padded, 4_194_304) == UNDECLARED_REASON
    assert unreadable(tf.constant([padded, jpeg])).numpy().tolist() == [UNDECLARED_REASON.encode(), b""]


def test_the_signature_refuses_a_png_declaring_20000x20000_and_answers_the_rest(signatures: Signatures) -> None:
    """The reviewer's image: 1.2 MB of PNG, 1.2 GB decoded: refused from its header, not decoded."""
    bomb, digit = png_declaring(20000, 20000), encoded(signatures.images[0], "PNG")
    answer = classify(signatures, [bomb, digit])
    assert [error.decode() for error in answer["errors"]] == [
        "declares 20000x20000 pixels, over serving.max_image_pixels 4194304", ""]
    assert answer["classes"][1] and not answer["classes"][0] and (answer["top_k"][0] == -1).all()
