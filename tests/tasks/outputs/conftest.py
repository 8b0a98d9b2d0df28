"""A trained model (random weights, the digits' shape), its SavedModel and test predictions, made once for the outputs
tests."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest


@dataclass(frozen=True)
class Exported:
    model_dir: Path
    savedmodel: Path
    images: np.ndarray  # float32, 0..255, the model's input shape
    expected: np.ndarray  # the trained model's probabilities for them


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory, digits_data: Path) -> Exported:
    """The model saved as the training's lead saves it, with what it writes for the steps after the training."""
    from trainer.model_io import load_model, save_model
    from trainer.model_outputs import SAVEDMODEL, write_model_outputs
    from trainer.models import build_model
    from trainer.prepared_data import read_manifest
    folder = tmp_path_factory.mktemp("exported")
    model = build_model("small_cnn", (8, 8, 1), 10)
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(scale=0.2, size=w.shape).astype(w.dtype) for w in model.get_weights()])
    spec = {"model": "small_cnn", "input_shape": [8, 8, 1], "num_classes": 10, "classes": [str(i) for i in range(10)]}
    save_model(model, spec, folder / "model")
    write_model_outputs(folder / "model", digits_data, read_manifest(digits_data))
    images = rng.integers(0, 256, (5, 8, 8, 1)).astype(np.float32)
    return Exported(folder / "model", folder / "model" / SAVEDMODEL, images,
                    load_model(folder / "model").predict(images, verbose=0))
