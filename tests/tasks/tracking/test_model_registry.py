"""Model registry and promotion gate, against a real MLflow store in a temporary folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.tracking import mlflow_store
from tasks.tracking.model_registry import CHALLENGER, CHAMPION, apply_gate, log_registered_model
from tests.tasks.tracking.conftest import EXPERIMENT


def tiny_savedmodel(path: Path) -> Path:
    """A SavedModel with ringflow's serving signature: 8x8x1 images -> 10 probabilities."""
    import tensorflow as tf
    model = tf.keras.Sequential([tf.keras.layers.Input((8, 8, 1)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(10, activation="softmax")])

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="images")])
    def serve(images: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = model(images)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1)}

    tf.saved_model.save(model, str(path), signatures={"serving_default": serve})
    return path


def registered_run(savedmodel: Path, test_accuracy: float) -> str:
    """A finished run holding test_accuracy and the model, registered; returns the new version."""
    run_id = mlflow_store.start_run(EXPERIMENT, {"learning_rate": test_accuracy, "data_hash": "abc.dir"}, {})
    mlflow_store.log_metrics(run_id, {"test_accuracy": test_accuracy})
    example = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 1)).astype(np.float32)
    return log_registered_model(run_id, savedmodel, example, "gate-test")


def test_gate_promotes_a_better_model_and_refuses_a_worse_one(store_dir: Path) -> None:
    import mlflow.pyfunc
    savedmodel = tiny_savedmodel(store_dir / "savedmodel")
    first = apply_gate("gate-test", registered_run(savedmodel, 0.90), 0.90, min_delta=0.01)
    assert (first.alias, first.champion_accuracy) == (CHAMPION, None)
    better = apply_gate("gate-test", registered_run(savedmodel, 0.95), 0.95, min_delta=0.01)
    assert (better.alias, better.champion_version, better.champion_accuracy) == (CHAMPION, first.version, 0.90)
    marginal = apply_gate("gate-test", registered_run(savedmodel, 0.955), 0.955, min_delta=0.01)
    assert (marginal.alias, marginal.champion_version, marginal.champion_accuracy) == (CHALLENGER, better.version, 0.95)
    client = mlflow_store.client()
    assert str(client.get_model_version_by_alias("gate-test", CHAMPION).version) == better.version
    assert str(client.get_model_version_by_alias("gate-test", CHALLENGER).version) == marginal.version
    tags = client.get_model_version("gate-test", marginal.version).tags
    recorded = (tags["gate.decision"], tags["test_accuracy"], tags["gate.champion_accuracy"])
    assert recorded == ("challenger", "0.955", "0.95")
    model = mlflow.pyfunc.load_model("models:/gate-test@champion")
    assert model.metadata.signature is not None and model.metadata.saved_input_example_info is not None
    probabilities = model.predict(np.zeros((3, 8, 8, 1), np.float32))
    assert probabilities.shape == (3, 10) and np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)

