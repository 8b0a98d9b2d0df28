"""Writes field.npz: u(x, t) = sin(pi x) exp(-t) sampled at random points (x in [-1, 1], t in [0, 1]), as the
physics-informed tutorials' first example: x float [n, 2] features, y float [n] targets (real: a regression).
python examples/field-regressor/make_data.py [file.npz] [points]"""
import sys
from pathlib import Path

import numpy as np

DEFAULT = Path(__file__).resolve().parent / "data" / "field.npz"


def field(points: np.ndarray) -> np.ndarray:
    return np.sin(np.pi * points[:, 0]) * np.exp(-points[:, 1])


def make_data(path: Path = DEFAULT, points: int = 2000, seed: int = 0) -> Path:
    samples = np.random.default_rng(seed).uniform([-1.0, 0.0], [1.0, 1.0], (points, 2)).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=samples, y=field(samples).astype(np.float32))
    return path


if __name__ == "__main__":
    arguments = sys.argv[1:]
    made = make_data(Path(arguments[0]) if arguments else DEFAULT, int(arguments[1]) if len(arguments) > 1 else 2000)
    print(f"wrote {made}")
