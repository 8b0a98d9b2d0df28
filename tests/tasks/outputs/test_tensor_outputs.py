"""A tensor model's outputs: a regressor's evaluation (MAE, MSE, RMSE, R², per target, its loss and train.metrics)
exact on known predictions and on the lead's test predictions; its SavedModel's float signature ("x" -> "predictions")
reloaded in a fresh process; the champion's scoring of the gate's metric; the MLflow model's numbers."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from tasks.outputs import export as export_module
from tasks.outputs.evaluate import evaluate, regression_scores, summary_line
from tasks.outputs.export import PARITY_TOLERANCE, export
from tasks.outputs.serve_check import score
from tasks.outputs.serving_model import SavedModelClassifier
from tests.tasks.outputs.conftest import TensorExported


def test_regression_scores_are_exact_on_a_tiny_case() -> None:
    targets = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    predictions = np.array([[1.0, 1.0], [3.0, 5.0], [4.0, 6.0]])
    evaluation = regression_scores(predictions, targets, ["u", "v"])
    metrics = evaluation.metrics
    assert (metrics["test_mae"], metrics["test_mse"]) == (0.5, 0.5)
    assert metrics["test_rmse"] == pytest.approx(np.sqrt(0.5)) and metrics["test_r2"] == pytest.approx(0.8125)
    assert (metrics["test_mae/u"], metrics["test_r2/u"], metrics["test_r2/v"]) == \
        (pytest.approx(1 / 3), pytest.approx(0.875), pytest.approx(0.75))
    assert evaluation.per_target["v"] == {"mae": pytest.approx(2 / 3), "rmse": pytest.approx(np.sqrt(2 / 3)),
                                          "r2": pytest.approx(0.75)}
    assert evaluation.task == "regression" and evaluation.per_class == {}
    one = regression_scores(predictions[:, :1], targets[:, :1], ["u"]).metrics
    assert "test_mae/u" not in one and one["test_r2"] == pytest.approx(0.875)  # one target: no per-target keys
    assert summary_line(metrics) == "test MAE:       0.5 (RMSE 0.7071, R² 0.8125)"
    assert summary_line({"test_accuracy": 0.95}) == "test accuracy:  0.9500"


def test_a_regressor_s_evaluation_comes_from_the_lead_s_test_predictions(tensor_exported: TensorExported) -> None:
    metrics = evaluate(tensor_exported.model_dir, tensor_exported.data_dir).metrics
    errors = tensor_exported.expected.astype(np.float64) - tensor_exported.targets
    assert metrics["test_mae"] == pytest.approx(np.abs(errors).mean(), rel=1e-5)
    assert metrics["test_rmse"] == pytest.approx(np.sqrt((errors ** 2).mean()), rel=1e-5)
    assert metrics["test_mae/y1"] == pytest.approx(np.abs(errors[:, 1]).mean(), rel=1e-5)
    assert metrics["test_loss"] == pytest.approx(metrics["test_mse"], rel=1e-4)  # the default loss: MSE
    ratio = np.abs(errors / tensor_exported.targets).mean() * 100
    assert metrics["test_mape"] == pytest.approx(ratio, rel=1e-3)  # train.metrics, by Keras
    assert 0.5 < metrics["test_r2"] < 1 and "test_accuracy" not in metrics


def test_the_tensor_savedmodel_answers_its_float_signature_after_reload(tensor_exported: TensorExported,
                                                                       tmp_path: Path) -> None:
    result = export(tensor_exported.model_dir, tmp_path / "savedmodel")
    assert result.max_abs_diff <= PARITY_TOLERANCE and result.checked_images == len(tensor_exported.features)
    serve = tf.saved_model.load(str(result.path)).signatures["serving_default"]
    (name, spec), = serve.structured_input_signature[1].items()
    assert (name, spec.shape.as_list(), spec.dtype) == ("x", [None, 3], tf.float32)
    given = serve(x=tf.constant(tensor_exported.features))
    assert list(given) == ["predictions"]
    assert np.allclose(given["predictions"].numpy(), tensor_exported.expected, atol=1e-5)
    mae = score(str(result.path), str(tensor_exported.data_dir), "test_mae", "regression")
    assert mae == pytest.approx(evaluate(tensor_exported.model_dir, tensor_exported.data_dir).metrics["test_mae"])
    assert score(str(result.path), str(tensor_exported.data_dir), "test_accuracy", "classification") is None
    export_module.close_fresh_process()


def test_the_mlflow_model_of_a_regressor_answers_numbers(tensor_exported: TensorExported) -> None:
    model = SavedModelClassifier()
    model.load_context(SimpleNamespace(artifacts={"savedmodel": str(tensor_exported.savedmodel)},
                                       model_config={"classes": []}))
    answer = model.predict(None, tensor_exported.features.astype(np.float64))
    assert answer.shape == (len(tensor_exported.features), 2)
    assert np.allclose(answer, tensor_exported.expected, atol=1e-5)


def test_a_tensor_classifier_s_signature_gives_predictions_probabilities_and_classes(tmp_path: Path) -> None:
    from trainer.model_outputs import write_tensor_savedmodel
    model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(3, activation="softmax")])
    write_tensor_savedmodel(model, tmp_path / "classifier", (4,), "classification")
    features = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    given = tf.saved_model.load(str(tmp_path / "classifier")).signatures["serving_default"](x=tf.constant(features))
    expected = model.predict(features, verbose=0)
    assert sorted(given) == ["classes", "predictions", "probabilities"]
    assert np.allclose(given["probabilities"].numpy(), expected, atol=1e-6)
    assert np.allclose(given["predictions"].numpy(), expected, atol=1e-6)
    assert given["classes"].numpy().tolist() == expected.argmax(axis=1).tolist()
