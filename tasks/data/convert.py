"""Conversion: split records -> TFRecord shards of about `shard_bytes`, written by parallel worker processes.

Workers import only NumPy, Pillow and ringflow's TF-free record writer, so they start fast.
"""
from __future__ import annotations

import io
import math
import multiprocessing
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from tasks.data.source_data import IMAGE_SUFFIXES, SplitData
from tasks.data.tfrecord_writer import TFRecordFile, encode_example, encode_tensor_example

CHANNELS_BY_MODE = {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "LA": 2, "PA": 4, "RGBA": 4}
IN_PROCESS_BELOW = 16 << 20  # bytes of source: less than this is converted in this process (no worker start-up)
RECORD_OVERHEAD = 120  # bytes of Example fields and framing around each image
EXIF_ORIENTATION = 0x0112
JPEG_QUALITY = 90  # a scaled-down JPEG: decodes about a quarter faster than at 95 (benchmarks/image_folder.py)


@dataclass(frozen=True)
class ShardJob:
    """One shard to write: its path, its records and their indices in the split."""
    path: str
    data: SplitData
    indices: tuple[int, ...] = ()
    max_side: int = 0  # data.max_image_side: a shorter side above it is scaled down to it; 0 keeps the size


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of one uint8 (H, W, C) image."""
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


class BadImage(ValueError):
    """An image file or record that cannot be decoded; the message is the reason."""


def _orientation(image: Any) -> int:
    try:
        return int(image.getexif().get(EXIF_ORIENTATION, 1))
    except (ValueError, TypeError, OSError):
        return 1


def _oversized(shape: tuple[int, int, int], max_side: int) -> bool:
    return bool(max_side) and min(shape[0], shape[1]) > max_side


def _reencoded(image: Any, image_format: str, channels: int, max_side: int) -> tuple[bytes, str, tuple[int, int, int]]:
    """The image turned upright (EXIF) and, when its shorter side exceeds max_side, scaled down to it (JPEG decoded at
    the smallest DCT scale that is still large enough). A scaled JPEG stays JPEG; anything else becomes PNG."""
    from PIL import Image, ImageOps
    width, height = image.size
    scale = max_side / min(width, height) if _oversized((height, width, channels), max_side) else 1.0
    target = (max(1, round(width * scale)), max(1, round(height * scale)))
    if image_format == "jpeg" and scale < 1:
        image.draft(image.mode, target)
    upright = ImageOps.exif_transpose(image).convert("L" if channels == 1 else "RGB")
    if scale < 1:  # sizes after the DCT scale and the turn
        factor = max_side / min(upright.size)
        upright = upright.resize((max(1, round(upright.width * factor)), max(1, round(upright.height * factor))),
                                 Image.Resampling.BICUBIC, reducing_gap=2.0)
    pixels = np.asarray(upright)
    pixels = pixels[..., None] if pixels.ndim == 2 else pixels
    if image_format != "jpeg" or scale == 1:  # only turned: lossless
        return encode_png(pixels), "png", pixels.shape
    buffer = io.BytesIO()
    upright.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue(), "jpeg", pixels.shape


def checked(blob: bytes, max_side: int = 0) -> tuple[bytes, str, tuple[int, int, int]]:
    """The bytes to store, their format ('jpeg' or 'png') and (height, width, channels), after decoding the whole
    image (JPEG at a reduced scale: every byte is still read). A JPEG with an EXIF rotation is stored turned upright
    (TensorFlow's decoder ignores EXIF); an image whose shorter side exceeds max_side (when set) is stored scaled down
    to it, so training decodes no more pixels than it uses. Raises BadImage with the reason."""
    from PIL import Image, UnidentifiedImageError
    if not blob:
        raise BadImage("empty file")
    try:
        with Image.open(io.BytesIO(blob)) as image:
            image_format = (image.format or "").lower()
            if image_format not in IMAGE_SUFFIXES.values():
                raise BadImage(f"unsupported image format {image.format}")
            shape = (image.height, image.width, CHANNELS_BY_MODE.get(image.mode, 3))
            if (image_format == "jpeg" and _orientation(image) != 1) or _oversized(shape, max_side):
                return _reencoded(image, image_format, 1 if shape[2] == 1 else 3, max_side)
            if image_format == "jpeg":
                image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except UnidentifiedImageError:
        raise BadImage("not an image (or an unsupported format)") from None
    except (OSError, SyntaxError, ValueError) as error:
        if isinstance(error, BadImage):
            raise
        raise BadImage(f"{type(error).__name__}: {error}") from None
    return blob, image_format, shape


def _encoded(job: ShardJob) -> Iterator[tuple[str, tuple[bytes, str, tuple[int, int, int]] | BadImage]]:
    """(name, (bytes, format, shape) or the BadImage) for each record of the shard, in order."""
    data = job.data
    if data.arrays is not None:
        for image in data.arrays:
            yield "", (encode_png(image), "png", image.shape)
        return
    names = data.files if data.files is not None else \
        [f"{Path(job.path).name.split('-')[0]} record {index}" for index in job.indices]
    blobs = data.blobs or []
    for index, name in enumerate(names):
        try:
            blob = Path(name).read_bytes() if data.files is not None else blobs[index]
            yield name, checked(blob, job.max_side)
        except (BadImage, OSError) as error:
            yield name, BadImage(str(error))


def _entry(writer: TFRecordFile, shapes: Counter, formats: Counter, bad: list[dict[str, str]]) -> dict[str, Any]:
    return {"file": writer.path.name, "count": writer.count, "bytes": writer.bytes,
            "sha256": writer.sha256.hexdigest(), "shapes": shapes, "formats": formats, "bad": bad}


def write_shard(job: ShardJob) -> dict[str, Any]:
    """Write one shard (atomically), leaving out images that cannot be decoded; returns its manifest entry plus
    shape and format counts and the images left out, with their reasons (none for tensor data)."""
    shapes, formats, bad = Counter[tuple[int, ...]](), Counter[str](), list[dict[str, str]]()
    features = job.data.features
    with TFRecordFile(Path(job.path)) as writer:
        if features is not None:
            for example, targets in zip(features, job.data.labels):
                writer.write(encode_tensor_example(example, targets))
            return _entry(writer, shapes, formats, bad)
        for (name, encoded), label in zip(_encoded(job), job.data.labels):
            if isinstance(encoded, BadImage):
                bad.append({"file": name, "reason": str(encoded)})
                continue
            blob, image_format, shape = encoded
            writer.write(encode_example(blob, image_format, int(label), shape))
            shapes[tuple(int(v) for v in shape)] += 1
            formats[image_format] += 1
    return _entry(writer, shapes, formats, bad)


def estimated_bytes(data: SplitData, sample: int = 64) -> int:
    """Expected size of a split's shards."""
    if data.features is not None:
        payload = 4 * (data.features.size + data.labels.size)  # float32 values
    elif data.blobs is not None:
        payload = sum(len(blob) for blob in data.blobs)
    elif data.files is not None:
        payload = sum(os.path.getsize(f) for f in data.files)
    else:
        assert data.arrays is not None  # one of files, blobs or arrays
        picked = data.arrays[: min(sample, len(data))]
        payload = int(np.mean([len(encode_png(image)) for image in picked]) * len(data)) if len(picked) else 0
    return payload + RECORD_OVERHEAD * len(data)


def plan_shards(split: str, data: SplitData, out_dir: Path, shard_bytes: int, min_shards: int,
                max_side: int = 0) -> list[ShardJob]:
    """Contiguous chunks of about shard_bytes, at least min_shards of them (never an empty one)."""
    count = max(1, min(len(data), max(min_shards, math.ceil(estimated_bytes(data) / shard_bytes))))
    chunks = np.array_split(np.arange(len(data)), count)
    return [ShardJob(str(out_dir / f"{split}-{i:05d}-of-{count:05d}.tfrecord"), data.take(chunk),
                     tuple(int(index) for index in chunk), max_side) for i, chunk in enumerate(chunks)]


def run_jobs(jobs: list[ShardJob], workers: int, progress: bool = True) -> dict[str, dict[str, Any]]:
    """Write all shards, in parallel processes when it pays; returns results by shard path."""
    from tqdm import tqdm
    total = sum(len(job.data) for job in jobs)
    source_bytes = sum(estimated_bytes(job.data, sample=8) for job in jobs)
    workers = min(workers or os.cpu_count() or 1, len(jobs))
    results: dict[str, dict[str, Any]] = {}
    with tqdm(total=total, unit="img", desc="prepare", disable=None if progress else True) as bar:
        resizing = any(job.max_side for job in jobs)  # full decodes and encodes: worth the workers' start-up
        if workers <= 1 or (source_bytes < IN_PROCESS_BELOW and not resizing):
            for job in jobs:
                results[job.path] = write_shard(job)
                bar.update(len(job.data))
            return results
        context = multiprocessing.get_context("spawn")  # no fork of a threaded parent; workers skip TensorFlow
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(write_shard, job): job for job in jobs}
            for future in as_completed(futures):
                results[futures[future].path] = future.result()
                bar.update(len(futures[future].data))
    return results
