"""evaluate: test loss and accuracy of a trained model on the test split."""
from __future__ import annotations

from pathlib import Path

from tasks.paths import PREPARED_DIR


def evaluate(model_dir: Path, data_dir: Path = PREPARED_DIR, batch_size: int = 256) -> dict[str, float]:
    """{'test_loss': ..., 'test_accuracy': ...} over the whole test split."""
    import tensorflow as tf

    from trainer.data import rank_dataset
    from trainer.model_io import load_model, read_spec
    from trainer.records import read_manifest
    manifest = read_manifest(data_dir)
    model = load_model(model_dir)
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    test_data = rank_dataset(data_dir, manifest, "test", batch_size=batch_size,
                             input_shape=tuple(read_spec(model_dir)["input_shape"]))
    loss, accuracy = model.evaluate(test_data, verbose=0)
    return {"test_loss": float(loss), "test_accuracy": float(accuracy)}
