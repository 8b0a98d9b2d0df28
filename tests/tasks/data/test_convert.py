"""Conversion: every image decoded whole before it is stored (bad ones named with the reason), shards of about
shard_bytes, at least min_shards and never an empty one, each written with its own counts and digest."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.convert import BadImage, ShardJob, checked, plan_shards, write_shard
from tasks.data.source_data import SplitData


def encoded(image_format: str, size: tuple[int, int] = (6, 5), mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, 128).save(buffer, format=image_format)
    return buffer.getvalue()


def test_a_png_or_jpeg_is_stored_as_it_is_with_its_shape() -> None:
    png = encoded("PNG", mode="L")
    assert checked(png) == (png, "png", (5, 6, 1))
    jpeg = encoded("JPEG")
    assert checked(jpeg) == (jpeg, "jpeg", (5, 6, 3))


def noisy_png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(("blob", "reason"), [
    (b"", "empty file"),
    (b"not an image at all", "not an image (or an unsupported format)"),
    (encoded("GIF", mode="P"), "unsupported image format GIF"),
    (noisy_png()[:2000], "OSError: "),  # cut short: only decoding it all finds out
])
def test_an_image_that_cannot_be_stored_is_refused_with_its_reason(blob: bytes, reason: str) -> None:
    with pytest.raises(BadImage) as refused:
        checked(blob)
    assert str(refused.value).startswith(reason)


def split_of_blobs(count: int) -> SplitData:
    return SplitData(np.arange(count) % 3, blobs=[encoded("PNG")] * count)


def test_shards_are_at_least_min_shards_never_empty_and_named_by_split_and_count(tmp_path: Path) -> None:
    jobs = plan_shards("train", split_of_blobs(10), tmp_path, shard_bytes=1 << 30, min_shards=4)
    assert [Path(job.path).name for job in jobs] == [f"train-{i:05d}-of-00004.tfrecord" for i in range(4)]
    assert [job.indices for job in jobs] == [(0, 1, 2), (3, 4, 5), (6, 7), (8, 9)]
    assert len(plan_shards("test", split_of_blobs(2), tmp_path, shard_bytes=1 << 30, min_shards=8)) == 2
    many = plan_shards("train", split_of_blobs(10), tmp_path, shard_bytes=100, min_shards=1)  # ~1 record each
    assert len(many) == 10


def test_a_shard_leaves_out_bad_images_and_records_its_counts_and_digest(tmp_path: Path) -> None:
    blobs = [encoded("PNG"), b"junk", encoded("JPEG")]
    job = ShardJob(str(tmp_path / "train-00000-of-00001.tfrecord"), SplitData(np.array([0, 1, 2]), blobs=blobs),
                   (0, 1, 2), 0)
    entry = write_shard(job)
    assert entry["count"] == 2 and entry["formats"] == {"png": 1, "jpeg": 1}
    assert entry["bad"] == [{"file": "train record 1", "reason": "not an image (or an unsupported format)"}]
    written = (tmp_path / "train-00000-of-00001.tfrecord").read_bytes()
    assert entry["sha256"] == hashlib.sha256(written).hexdigest() and entry["bytes"] == len(written)
