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


@dataclass(frozen=True)
class TensorExported:
    model_dir: Path
    data_dir: Path
    savedmodel: Path
    features: np.ndarray  # float32 [N, 3]: the test split's
    targets: np.ndarray  # float32 [N, 2]
    expected: np.ndarray  # the trained model's predictions for them


REGRESSOR = "tests.trainer.user_builders:build"  # Dense(outputs) on any features


@pytest.fixture(scope="session")
def tensor_exported(tmp_path_factory: pytest.TempPathFactory) -> TensorExported:
    """A regressor of 3 features -> 2 targets (fixed weights, near the data's own rule), saved as the training's lead
    saves it (train.metrics: mape) with what it writes for the steps after the training, on prepared npz data."""
    from tasks.data.prepare import prepare
    from tasks.launch.job_config import job_spec, write_trainer_config
    from tasks.params import DataParams, Params
    from trainer.data import rank_dataset
    from trainer.model_io import save_model
    from trainer.model_outputs import SAVEDMODEL, write_model_outputs
    from trainer.models import build_model
    from trainer.prepared_data import read_manifest
    folder = tmp_path_factory.mktemp("tensor")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 3))
    rule = np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0]])
    np.savez(folder / "field.npz", x=x, y=x @ rule + rng.normal(scale=0.1, size=(120, 2)))
    data_dir = folder / "prepared"
    prepare(DataParams(dataset=f"npz:{folder / 'field.npz'}", min_shards=1), data_dir, progress=False)
    model = build_model(REGRESSOR, (3,), 2)
    model.set_weights([rule.astype(np.float32) * 0.9, np.array([0.05, -0.05], np.float32)])
    model_dir = folder / "model"
    params = Params.model_validate({"train": {"metrics": ["mape"]}, "input": {"augment": "off"}})
    write_trainer_config(params, job_spec(params, data_dir, model_dir, folder / "checkpoints"))
    spec = {"model": REGRESSOR, "input_shape": [3], "num_classes": 2, "outputs": 2, "classes": [],
            "task": "regression"}
    save_model(model, spec, model_dir)
    manifest = read_manifest(data_dir)
    write_model_outputs(model_dir, data_dir, manifest)
    batches = list(rank_dataset(data_dir, manifest, "test", batch_size=256, task="regression"))
    features = np.concatenate([f.numpy() for f, _ in batches])
    targets = np.concatenate([t.numpy() for _, t in batches])
    return TensorExported(model_dir, data_dir, model_dir / SAVEDMODEL, features, targets,
                          model.predict(features, verbose=0))
