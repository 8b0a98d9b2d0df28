"""A real image folder: every file is decoded at conversion; bad files are named (data.bad_images: fail) or left out
and listed (skip); the formats such folders hold convert to the dataset's channel count, EXIF rotation applied."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.prepare import prepare
from tasks.data.source_data import SourceError
from tasks.data.validate import validate
from tasks.params import DataParams
from tasks.steps import left_out_line
from tests.helpers import read_split
from trainer.prepared_data import SPLITS, read_manifest


def encoded(image: Image.Image, image_format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def good_folder(root: Path, per_class: int = 6) -> None:
    """Two classes of plain RGB JPEG and PNG images."""
    rng = np.random.default_rng(3)
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8))
            suffix, image_format = ("jpg", "JPEG") if i % 2 else ("png", "PNG")
            (root / name / f"{i}.{suffix}").write_bytes(encoded(pixels, image_format))


BAD_FILES = {
    "truncated.jpg": lambda good: good[: len(good) // 2],
    "empty.png": lambda good: b"",
    "notes.jpg": lambda good: b"these are not pixels\n" * 20,
    "animation.png": lambda good: encoded(Image.new("RGB", (8, 8)), "GIF"),
}


def add_bad_files(root: Path) -> dict[str, str]:
    good = encoded(Image.fromarray(np.full((24, 24, 3), 90, np.uint8)), "JPEG")
    for name, make in BAD_FILES.items():
        (root / "cat" / name).write_bytes(make(good))
    return {str(root / "cat" / name): name for name in BAD_FILES}


def test_bad_files_stop_conversion_with_one_line_naming_them(tmp_path: Path) -> None:
    good_folder(tmp_path / "images")
    add_bad_files(tmp_path / "images")
    params = DataParams(dataset=f"folder:{tmp_path / 'images'}", min_shards=1)
    with pytest.raises(SourceError, match=r"^4 image\(s\) cannot be decoded \(.*(truncated|empty|notes|animation)"
                                          r".*: fix or remove them, or set data.bad_images: skip$") as error:
        prepare(params, tmp_path / "prepared", progress=False)
    assert "\n" not in str(error.value) and "; ...)" in str(error.value)  # the first three, then "..."
    assert not (tmp_path / "prepared").exists()  # nothing that looks finished


def test_bad_files_are_left_out_and_listed_with_skip(tmp_path: Path) -> None:
    good_folder(tmp_path / "images")
    bad = add_bad_files(tmp_path / "images")
    params = DataParams(dataset=f"folder:{tmp_path / 'images'}", min_shards=1, bad_images="skip")
    manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    assert {item["file"] for item in manifest["skipped"]} == set(bad)
    reasons = {bad[item["file"]]: item["reason"] for item in manifest["skipped"]}
    assert reasons["empty.png"] == "empty file" and "unsupported image format GIF" in reasons["animation.png"]
    assert "not an image" in reasons["notes.jpg"] and reasons["truncated.jpg"].startswith("OSError")
    assert sum(manifest["splits"][split]["count"] for split in SPLITS) == 12
    assert validate(tmp_path / "prepared")["skipped_images"] == manifest["skipped"]
    line = left_out_line(manifest, tmp_path / "prepared")  # what the pipeline prints
    assert line.startswith("4 image(s) left out because they cannot be decoded (data.bad_images: skip), listed in ")


def odd_formats(root: Path) -> None:
    """One class of each format a real folder holds, all of the same 16x16 picture (upright: a bright top half)."""
    picture = np.zeros((16, 16, 3), np.uint8)
    picture[:8] = 240
    rgb = Image.fromarray(picture)
    files = {"gray.png": encoded(rgb.convert("L"), "PNG"), "rgba.png": encoded(rgb.convert("RGBA"), "PNG"),
             "palette.png": encoded(rgb.convert("P"), "PNG"), "cmyk.jpg": encoded(rgb.convert("CMYK"), "JPEG"),
             "deep.png": encoded(Image.fromarray((np.asarray(rgb.convert("L")).astype(np.uint16) * 257)), "PNG"),
             "png_named.jpg": encoded(rgb, "PNG"), "plain.jpg": encoded(rgb, "JPEG", quality=95)}
    exif = Image.Exif()
    exif[0x0112] = 3  # stored upside down; viewers turn it 180 degrees
    files["rotated.jpg"] = encoded(rgb.rotate(180), "JPEG", quality=95, exif=exif)
    (root / "all").mkdir(parents=True)
    for name, blob in files.items():
        (root / "all" / name).write_bytes(blob)


def test_every_format_of_a_real_folder_converts_upright_to_the_channel_count(tmp_path: Path) -> None:
    odd_formats(tmp_path / "images")
    params = DataParams(dataset=f"folder:{tmp_path / 'images'}", min_shards=1, val_fraction=0.15,
                        test_fraction=0.15)
    manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    assert manifest["skipped"] == [] and manifest["channels"] == 3
    images = np.concatenate([read_split(tmp_path / "prepared", split)[0] for split in SPLITS])
    assert images.shape == (8, 16, 16, 3)
    top, bottom = images[:, :8].mean(axis=(1, 2, 3)), images[:, 8:].mean(axis=(1, 2, 3))
    assert (top > 200).all() and (bottom < 40).all()  # every one upright and alike, the rotated JPEG too
    assert read_manifest(tmp_path / "prepared")["formats"] == {"png": 6, "jpeg": 2}  # the rotated one became PNG


def test_max_image_side_stores_large_images_scaled_down_and_keeps_small_ones() -> None:
    from tasks.data.convert import checked
    photo = Image.fromarray(np.random.default_rng(0).integers(0, 256, (120, 200, 3), dtype=np.uint8))
    big_jpeg, small_png = encoded(photo, "JPEG", quality=90), encoded(photo.resize((50, 40)), "PNG")
    stored, image_format, shape = checked(big_jpeg, max_side=64)
    assert (image_format, shape) == ("jpeg", (64, 107, 3))  # the shorter side to 64, aspect kept
    assert Image.open(io.BytesIO(stored)).size == (107, 64)
    assert checked(small_png, max_side=64) == (small_png, "png", (40, 50, 3))  # not larger: bytes kept
    assert checked(big_jpeg) == (big_jpeg, "jpeg", (120, 200, 3))  # 0: as it is
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: turned upright, then scaled
    rotated = encoded(photo, "JPEG", exif=exif.tobytes())
    assert checked(rotated, max_side=64)[2] == (107, 64, 3)
