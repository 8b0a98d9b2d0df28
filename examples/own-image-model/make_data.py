"""Writes a tiny image folder (one sub-folder per class, PNG files) from scikit-learn's digits, so the example runs
without a download: python examples/own-image-model/make_data.py [folder] [per_class]."""
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

DEFAULT = Path(__file__).resolve().parent / "data" / "digits-png"


def make_data(folder: Path = DEFAULT, per_class: int = 40) -> Path:
    digits = load_digits()
    pixels = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)
    for label in range(10):
        (folder / str(label)).mkdir(parents=True, exist_ok=True)
        for number, index in enumerate(np.flatnonzero(digits.target == label)[:per_class]):
            Image.fromarray(pixels[index], mode="L").save(folder / str(label) / f"{number:03d}.png")
    return folder


if __name__ == "__main__":
    arguments = sys.argv[1:]
    made = make_data(Path(arguments[0]) if arguments else DEFAULT, int(arguments[1]) if len(arguments) > 1 else 40)
    print(f"wrote {sum(1 for _ in made.rglob('*.png'))} images under {made}")
