"""What the lead process writes beside the trained model for the steps after the training, where the model, the data
and the accelerator already are: the test split's class probabilities (evaluate scores them), the SavedModel with
its serving signature and a sample of test images with the model's probabilities for them (export checks the
SavedModel's reload against them in a fresh process; register takes its input example from them). The steps after
the training then need no TensorFlow in the pipeline's process.

The model is rebuilt from the weights just saved, outside any distribution strategy, in float32: what is evaluated
and exported is the saved model, as a later process would load it.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from trainer.model_io import load_model, read_spec

TEST_PREDICTIONS = "test_predictions.npz"  # probabilities [N, classes] (float32), labels [N]: the whole test split
PARITY_SAMPLE = "parity_sample.npz"  # images [<=256, h, w, c] (float32, 0..255) and the model's probabilities
SAVEDMODEL = "savedmodel"
SIGNATURE = "serving_default"
PARITY_IMAGES = 256
BATCH = 256


def write_savedmodel(model: Any, path: Path, class_names: list[str],
                     input_shape: tuple[int, ...] | None = None) -> None:
    """Save a trained Keras model's signatures with the variables they read: `serving_default` (float32 images of
    the model's input -> probabilities, class indices) and `serving_bytes` (encoded images -> class names, scores;
    trainer/serving_bytes.py). The SavedModel holds those functions, not the Keras object: its readers (the reload
    check, the MLflow model, serving) use the signatures only, and the Keras object's per-layer call traces made
    saving about 6 times slower (measured: 2.7 s against 0.4 s for the digits' model). `input_shape`: one
    example's, where the model does not say it (a subclassed model)."""
    import tensorflow as tf

    from trainer.serving_bytes import BYTES_SIGNATURE, bytes_signature
    shape = tuple(input_shape or model.input_shape[1:])
    spec = tf.TensorSpec([None, *shape], tf.float32, name="images")

    @tf.function(input_signature=[spec], autograph=False)
    def serve(images: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = model(images, training=False)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1)}

    holder = tf.Module()
    holder.model_variables = list(model.variables)  # what serve reads; saved with it
    serve_bytes = bytes_signature(model, shape, class_names)
    tf.saved_model.save(holder, str(path), signatures={SIGNATURE: serve, BYTES_SIGNATURE: serve_bytes})


def split_predictions(model: Any, data_dir: Path, manifest: dict[str, Any], split: str,
                      input_shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(probabilities [N, classes], labels [N], the first batch's images) of the model over a whole split."""
    from trainer.data import rank_dataset
    probabilities: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    first_images = np.zeros((0, *input_shape), np.float32)
    for images, batch_labels in rank_dataset(data_dir, manifest, split, batch_size=BATCH, input_shape=input_shape):
        if not probabilities:
            first_images = images.numpy()
        probabilities.append(model(images, training=False).numpy())
        labels.append(batch_labels.numpy())
    if not probabilities:
        return np.zeros((0, manifest["num_classes"]), np.float32), np.zeros(0, np.int64), first_images
    return np.concatenate(probabilities), np.concatenate(labels).astype(np.int64), first_images


def _save_npz(path: Path, **arrays: Any) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    with open(tmp, "wb") as out:
        np.savez(out, **arrays)
    os.replace(tmp, path)


def write_model_outputs(model_dir: Path, data_dir: Path, manifest: dict[str, Any]) -> None:
    """The SavedModel, the parity sample and last the test predictions (the mark that all three are there) of the
    model saved in model_dir, into it."""
    import tensorflow as tf
    tf.keras.mixed_precision.set_global_policy("float32")  # as a later process loads it
    model = load_model(model_dir)
    spec = read_spec(model_dir)
    input_shape = tuple(spec["input_shape"])
    probabilities, labels, images = split_predictions(model, data_dir, manifest, "test", input_shape)
    tmp = model_dir / f".tmp-{SAVEDMODEL}"
    shutil.rmtree(tmp, ignore_errors=True)
    write_savedmodel(model, tmp, spec.get("classes") or [str(index) for index in range(spec["num_classes"])],
                     input_shape)
    shutil.rmtree(model_dir / SAVEDMODEL, ignore_errors=True)
    os.replace(tmp, model_dir / SAVEDMODEL)
    sample = images[:PARITY_IMAGES]
    _save_npz(model_dir / PARITY_SAMPLE, images=sample, probabilities=probabilities[:len(sample)])
    _save_npz(model_dir / TEST_PREDICTIONS, probabilities=probabilities, labels=labels)


if __name__ == "__main__":  # python -m trainer.model_outputs MODEL_DIR DATA_DIR: for a model trained without them
    import sys

    from trainer.lean_imports import skip_unused_libraries
    from trainer.prepared_data import read_manifest
    skip_unused_libraries()
    write_model_outputs(Path(sys.argv[1]), Path(sys.argv[2]), read_manifest(Path(sys.argv[2])))
