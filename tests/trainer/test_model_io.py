"""A trained model's directory: the model rebuilt from its spec with the weights it was saved with, the training
summary read back as written, each written whole (no temporary file left), and clear errors when there is none."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainer.model_io import (
    MODEL_SPEC,
    load_model,
    read_spec,
    read_train_summary,
    save_model,
    write_train_summary,
)
from trainer.models import build_model


def test_a_saved_model_loads_back_as_it_was_trained(tmp_path: Path) -> None:
    model = build_model("small_cnn", (8, 8, 1), 3)
    model.set_weights([np.random.default_rng(0).normal(size=w.shape).astype(w.dtype) for w in model.get_weights()])
    spec = {"model": "small_cnn", "input_shape": [8, 8, 1], "num_classes": 3, "classes": ["a", "b", "c"]}
    save_model(model, spec, tmp_path / "model")
    save_model(model, spec, tmp_path / "model")  # again over the first: replaced
    assert read_spec(tmp_path / "model") == spec
    loaded = load_model(tmp_path / "model")
    assert loaded.name == "small_cnn" and loaded.output_shape == (None, 3)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), loaded.get_weights()))
    assert sorted(path.name for path in (tmp_path / "model").iterdir()) == [MODEL_SPEC, "model.weights.h5"]


def test_the_training_summary_reads_back_as_written(tmp_path: Path) -> None:
    write_train_summary({"backend": "horovod", "history": {"loss": [0.5]}}, tmp_path)
    write_train_summary({"backend": "mirrored", "history": {"loss": [0.5, 0.25]}}, tmp_path)
    assert read_train_summary(tmp_path) == {"backend": "mirrored", "history": {"loss": [0.5, 0.25]}}
    assert [path.name for path in tmp_path.iterdir()] == ["train_summary.json"]


def test_a_directory_without_a_model_says_to_run_the_train_step(tmp_path: Path) -> None:
    for read in (read_spec, load_model):
        with pytest.raises(FileNotFoundError, match=r"no trained model: .*model\.json is missing \(run the train "
                                                    r"step\)"):
            read(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no training summary: .* is missing \(run the train step\)"):
        read_train_summary(tmp_path)
