"""export: a SavedModel with a serving signature, reloaded in a separate process and checked."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.atomic import atomic_dir
from tasks.paths import PREPARED_DIR, ROOT

SIGNATURE = "serving_default"
PARITY_TOLERANCE = 1e-5


@dataclass(frozen=True)
class ExportResult:
    """The SavedModel and how closely its reload matched the trained model."""
    path: Path
    max_abs_diff: float
    checked_images: int


def sample_test_images(data_dir: Path, model_dir: Path, limit: int = 256) -> np.ndarray:
    """Up to `limit` test images (float32, 0..255, at the model's input shape) for the parity check."""
    from trainer.data import rank_dataset
    from trainer.model_io import read_spec
    from trainer.prepared_data import read_manifest
    dataset = rank_dataset(data_dir, read_manifest(data_dir), "test", batch_size=limit,
                           input_shape=tuple(read_spec(model_dir)["input_shape"]))
    images, _ = next(iter(dataset))
    return images.numpy()


def write_savedmodel(model: Any, path: Path) -> None:
    """Save a trained Keras model's `serving_default` signature (images -> probabilities, classes) with the
    variables it reads. The SavedModel holds that function, not the Keras object: its readers (the reload check,
    the MLflow model, serving) use the signature only, and the Keras object's per-layer call traces made saving
    about 6 times slower (measured: 2.7 s against 0.4 s for the digits' model)."""
    import tensorflow as tf
    spec = tf.TensorSpec([None, *model.input_shape[1:]], tf.float32, name="images")

    @tf.function(input_signature=[spec])
    def serve(images: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = model(images, training=False)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1)}

    holder = tf.Module()
    holder.model_variables = list(model.variables)  # what serve reads; saved with it
    tf.saved_model.save(holder, str(path), signatures={SIGNATURE: serve})


class FreshProcessCheck:
    """Probabilities from a SavedModel, computed in a fresh Python process: started ahead (it imports TensorFlow
    meanwhile), asked once the SavedModel is written."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tasks.outputs.serve_check"], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def predictions(self, savedmodel: Path, images: np.ndarray, work_dir: Path) -> np.ndarray:
        images_file, out_file = work_dir / "images.npy", work_dir / "probabilities.npy"
        np.save(images_file, images)
        asked = json.dumps([str(savedmodel), str(images_file), str(out_file)]) + "\n"
        output, _ = self.process.communicate(asked, timeout=600)
        if self.process.returncode != 0:
            raise RuntimeError(f"the SavedModel's reload failed: {(output.strip().splitlines() or ['no output'])[-1]}")
        return np.load(out_file)

    def close(self) -> None:
        """Unasked (export failed before): the process ends at the end of its input."""
        if self.process.poll() is None:
            self.process.communicate("", timeout=600)


_started_ahead: list[FreshProcessCheck] = []  # at most one: the next export's, started while this process evaluates


def start_reload_check_ahead() -> None:
    """Start the next export's fresh process now: it imports TensorFlow on another core while this process
    evaluates. Unused, it ends with this process (the end of its input)."""
    if not _started_ahead:
        _started_ahead.append(FreshProcessCheck())


def reload_check() -> FreshProcessCheck:
    """The fresh process started ahead (if it is still alive), else a new one."""
    ahead = _started_ahead.pop() if _started_ahead else None
    return ahead if ahead is not None and ahead.process.poll() is None else FreshProcessCheck()


def export(model_dir: Path, export_dir: Path, data_dir: Path = PREPARED_DIR) -> ExportResult:
    """Write the SavedModel to export_dir only after its reload gives the trained model's predictions."""
    from trainer.model_io import load_model
    with tempfile.TemporaryDirectory() as work, atomic_dir(export_dir) as tmp:
        check = reload_check()
        try:
            images = sample_test_images(data_dir, model_dir)
            model = load_model(model_dir)
            expected = model(images, training=False).numpy()
            write_savedmodel(model, tmp)
            reloaded = check.predictions(tmp, images, Path(work))
        finally:
            check.close()
        max_abs_diff = float(np.max(np.abs(reloaded - expected)))
        if max_abs_diff > PARITY_TOLERANCE:
            raise RuntimeError(f"SavedModel reload differs from the trained model by {max_abs_diff:.3g}")
    return ExportResult(export_dir, max_abs_diff, len(images))
