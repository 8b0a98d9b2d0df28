"""export: a SavedModel with a serving signature, reloaded in a separate process and checked."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

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


def write_savedmodel(model_dir: Path, path: Path) -> None:
    """Save the trained model with a `serving_default` signature: images -> probabilities, classes."""
    import tensorflow as tf

    from trainer.model_io import load_model
    model = load_model(model_dir)
    spec = tf.TensorSpec([None, *model.input_shape[1:]], tf.float32, name="images")

    @tf.function(input_signature=[spec])
    def serve(images: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = model(images, training=False)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1)}

    tf.saved_model.save(model, str(path), signatures={SIGNATURE: serve})


class FreshProcessCheck:
    """Probabilities from the SavedModel, computed in a fresh Python process: started before the SavedModel is
    written (it imports TensorFlow meanwhile), asked once it is."""

    def __init__(self, savedmodel: Path, work_dir: Path) -> None:
        self.images_file, self.out_file = work_dir / "images.npy", work_dir / "probabilities.npy"
        self.process = subprocess.Popen([sys.executable, "-m", "tasks.outputs.serve_check", str(savedmodel),
                                         str(self.images_file), str(self.out_file)], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def predictions(self, images: np.ndarray) -> np.ndarray:
        np.save(self.images_file, images)
        output, _ = self.process.communicate("go\n", timeout=600)
        if self.process.returncode != 0:
            raise RuntimeError(f"the SavedModel's reload failed: {(output.strip().splitlines() or ['no output'])[-1]}")
        return np.load(self.out_file)

    def close(self) -> None:
        """Unasked (export failed before): the process ends at the end of its input."""
        if self.process.poll() is None:
            self.process.communicate("", timeout=600)


def export(model_dir: Path, export_dir: Path, data_dir: Path = PREPARED_DIR) -> ExportResult:
    """Write the SavedModel to export_dir only after its reload gives the trained model's predictions."""
    from trainer.model_io import load_model
    with tempfile.TemporaryDirectory() as work, atomic_dir(export_dir) as tmp:
        check = FreshProcessCheck(tmp, Path(work))
        try:
            images = sample_test_images(data_dir, model_dir)
            expected = load_model(model_dir).predict(images, verbose=0)
            write_savedmodel(model_dir, tmp)
            reloaded = check.predictions(images)
        finally:
            check.close()
        max_abs_diff = float(np.max(np.abs(reloaded - expected)))
        if max_abs_diff > PARITY_TOLERANCE:
            raise RuntimeError(f"SavedModel reload differs from the trained model by {max_abs_diff:.3g}")
    return ExportResult(export_dir, max_abs_diff, len(images))
