"""Export: a SavedModel whose `serving_default` takes float images and gives probabilities and classes; the test
images for the parity check come at the model's input shape; the whole export, with its reload in a fresh process,
writes the SavedModel only when the reload agrees."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tasks.outputs import export as export_module
from tasks.outputs.export import PARITY_TOLERANCE, export, sample_test_images
from tests.tasks.outputs.conftest import Exported


def test_the_serving_signature_takes_images_and_gives_probabilities_and_classes(exported: Exported) -> None:
    serve = tf.saved_model.load(str(exported.savedmodel)).signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["images"]
    given = serve(images=tf.constant(exported.images))
    assert sorted(given) == ["classes", "probabilities"]
    assert given["classes"].numpy().tolist() == np.argmax(exported.expected, axis=-1).tolist()


def test_the_parity_images_are_test_images_at_the_model_s_input(exported: Exported, digits_data: Path) -> None:
    images = sample_test_images(digits_data, exported.model_dir, limit=7)
    assert images.shape == (7, 8, 8, 1) and images.dtype == np.float32 and 0 <= images.min() < images.max() <= 255


def test_the_savedmodel_is_written_once_the_fresh_process_started_ahead_reloaded_it_alike(
        exported: Exported, digits_data: Path, tmp_path: Path) -> None:
    export_module.start_reload_check_ahead()
    (ahead,) = export_module._started_ahead
    result = export(exported.model_dir, tmp_path / "savedmodel", digits_data)
    assert result.path == tmp_path / "savedmodel" and (result.path / "saved_model.pb").is_file()
    assert result.max_abs_diff <= PARITY_TOLERANCE and result.checked_images > 0
    assert ahead.process.returncode == 0 and not export_module._started_ahead  # it was the one asked, once


def test_a_fresh_process_started_ahead_that_died_is_replaced() -> None:
    export_module.start_reload_check_ahead()
    (dead,) = export_module._started_ahead
    dead.process.kill()
    dead.process.wait()
    replacement = export_module.reload_check()
    assert replacement is not dead and replacement.process.poll() is None
    replacement.close()
    assert replacement.process.returncode == 0  # unasked, it ends at the end of its input


def test_a_savedmodel_that_does_not_reload_leaves_nothing(exported: Exported, digits_data: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_savedmodel(model: object, path: Path) -> None:
        (path / "saved_model.pb").write_text("not a SavedModel")
    monkeypatch.setattr(export_module, "write_savedmodel", broken_savedmodel)
    with pytest.raises(RuntimeError, match="the SavedModel's reload failed: "):
        export(exported.model_dir, tmp_path / "savedmodel", digits_data)
    assert not (tmp_path / "savedmodel").exists()
