"""evaluate: the task's test metrics, scored from the test split's outputs the training's lead process wrote beside
the model: classification: test loss, accuracy (top-5 with more than 10 classes), per-class precision/recall,
confusion matrix; regression: MAE, MSE, RMSE and R² (per target too when there are several), the training's loss;
both: the Keras metrics of train.metrics (test_<name>)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tasks.paths import PREPARED_DIR
from trainer.config import CONFIG_FILE_NAME, read_config
from trainer.model_outputs import TEST_PREDICTIONS

TOP_K = 5


@dataclass(frozen=True)
class Evaluation:
    """What the test split says about a model."""
    metrics: dict[str, float]  # test_loss, test_accuracy[, test_top5_accuracy]
    per_class: dict[str, dict[str, float]]  # class name -> precision, recall, support
    confusion: np.ndarray  # [true class, predicted class] counts (regression: none, [0, 0])
    class_names: list[str]
    task: str = "classification"
    per_target: dict[str, dict[str, float]] = field(default_factory=dict)  # regression: target -> mae, rmse, r2


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts of (true, predicted) pairs."""
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def per_class_scores(matrix: np.ndarray, class_names: list[str]) -> dict[str, dict[str, float]]:
    """Precision and recall of every class (0 where a class was never predicted / never present)."""
    true_positives = np.diag(matrix).astype(np.float64)
    predicted, actual = matrix.sum(axis=0), matrix.sum(axis=1)
    precision = np.divide(true_positives, predicted, out=np.zeros_like(true_positives), where=predicted > 0)
    recall = np.divide(true_positives, actual, out=np.zeros_like(true_positives), where=actual > 0)
    return {name: {"precision": float(precision[i]), "recall": float(recall[i]), "support": int(actual[i])}
            for i, name in enumerate(class_names)}


def score(probabilities: np.ndarray, labels: np.ndarray, class_names: list[str]) -> Evaluation:
    """Every test metric from the predicted probabilities."""
    picked = np.clip(probabilities[np.arange(len(labels)), labels], 1e-7, 1.0)
    predicted = probabilities.argmax(axis=1)
    metrics = {"test_loss": float(-np.log(picked).mean()), "test_accuracy": float((predicted == labels).mean())}
    if len(class_names) > 10:
        top_k = np.argsort(-probabilities, axis=1)[:, :TOP_K]
        metrics[f"test_top{TOP_K}_accuracy"] = float((top_k == labels[:, None]).any(axis=1).mean())
    matrix = confusion_matrix(labels, predicted, len(class_names))
    return Evaluation(metrics, per_class_scores(matrix, class_names), matrix, class_names)


def metric_key(text: str) -> str:
    """A name as MLflow allows it in a metric key."""
    return "".join(char if char.isalnum() or char in "_-./" else "_" for char in text)


def r2_scores(targets: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """R² of each target (column): 1 - residual / total sum of squares; a constant target: 1 when predicted
    exactly, else 0 (as scikit-learn says)."""
    residual = ((targets - predictions) ** 2).sum(axis=0)
    total = ((targets - targets.mean(axis=0)) ** 2).sum(axis=0)
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, 1 - residual / safe, np.where(residual == 0, 1.0, 0.0))


def regression_scores(predictions: np.ndarray, targets: np.ndarray, target_names: list[str]) -> Evaluation:
    """test_mae, test_mse, test_rmse and test_r2 (R² averaged over the targets) of predictions [N, k]; per target
    too (test_mae/<name> ...) when k > 1."""
    predictions, targets = predictions.astype(np.float64), targets.astype(np.float64).reshape(predictions.shape)
    errors = predictions - targets
    mae, mse, r2 = np.abs(errors).mean(axis=0), (errors ** 2).mean(axis=0), r2_scores(targets, predictions)
    metrics = {"test_mae": float(np.abs(errors).mean()), "test_mse": float((errors ** 2).mean()),
               "test_rmse": float(np.sqrt((errors ** 2).mean())), "test_r2": float(r2.mean())}
    names = target_names if len(target_names) == predictions.shape[1] else [f"y{i}" for i in range(len(mae))]
    per_target = {name: {"mae": float(mae[i]), "rmse": float(np.sqrt(mse[i])), "r2": float(r2[i])}
                  for i, name in enumerate(names)}
    if len(names) > 1:
        metrics |= {f"test_{score}/{metric_key(name)}": values[score]
                    for name, values in per_target.items() for score in ("mae", "rmse", "r2")}
    return Evaluation(metrics, {}, np.zeros((0, 0), np.int64), [], "regression", per_target)


def task_scores(outputs: np.ndarray, targets: np.ndarray, task: str, manifest: dict[str, Any]) -> Evaluation:
    """The task's evaluation of a split's outputs and targets (classes and target names from the manifest)."""
    if task == "classification":
        return score(outputs, targets.astype(np.int64), [str(name) for name in manifest["classes"]])
    return regression_scores(outputs, targets, [str(name) for name in manifest.get("target_names") or []])


def summary_line(metrics: dict[str, float]) -> str:
    """The run's test result in one line: accuracy for a classifier, MAE, RMSE and R² for a regressor."""
    if "test_accuracy" in metrics:
        return f"test accuracy:  {metrics['test_accuracy']:.4f}"
    mae, rmse, r2 = (metrics.get(f"test_{name}", float("nan")) for name in ("mae", "rmse", "r2"))
    return f"test MAE:       {mae:.4g} (RMSE {rmse:.4g}, R² {r2:.4f})"


class NoTestPredictions(RuntimeError):
    """The model directory lacks the test predictions its training writes."""
    bad_input = True


@dataclass(frozen=True)
class TestPredictions:
    """What the lead process wrote over the whole test split: the task, the model's outputs (probabilities
    [N, classes] or predictions [N, k]), the targets (labels [N] or values [N, k]), the Keras metrics it computed."""
    task: str
    outputs: np.ndarray
    targets: np.ndarray
    keras_metrics: dict[str, float]


def test_predictions(model_dir: Path) -> TestPredictions:
    """The test predictions the lead process wrote beside the model."""
    path = Path(model_dir) / TEST_PREDICTIONS
    if not path.is_file():
        raise NoTestPredictions(f"no test predictions: {path} is missing (its training wrote none: train again)")
    with np.load(path) as saved:
        extra = dict(zip(saved["metric_names"].tolist(), saved["metric_values"].tolist())) \
            if "metric_names" in saved.files else {}
        if "probabilities" in saved.files:
            return TestPredictions("classification", saved["probabilities"].astype(np.float64), saved["labels"], extra)
        return TestPredictions("regression", saved["predictions"].astype(np.float64),
                               saved["targets"].astype(np.float64), extra)


def outputs_written(model_dir: Path, data_dir: Path) -> None:
    """A model trained without them (a sweep's trials) gets its test predictions, parity sample and SavedModel now,
    in a process of its own (it imports TensorFlow; otherwise the training's lead process writes them)."""
    import subprocess
    import sys

    from tasks.paths import ROOT
    if (Path(model_dir) / TEST_PREDICTIONS).is_file():
        return
    done = subprocess.run([sys.executable, "-m", "trainer.model_outputs", str(model_dir), str(data_dir)], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines() or ["no output"]
        raise RuntimeError(f"writing the model's test predictions and SavedModel failed: {said[-1]}")


def evaluate(model_dir: Path, data_dir: Path = PREPARED_DIR) -> Evaluation:
    """The model's evaluation over the whole test split, from the probabilities its training wrote."""
    from trainer.prepared_data import read_manifest
    saved = test_predictions(model_dir)
    evaluation = task_scores(saved.outputs, saved.targets, saved.task, read_manifest(data_dir))
    extra = {f"test_{metric_key(name)}": value for name, value in saved.keras_metrics.items()}
    evaluation.metrics.update({name: value for name, value in extra.items() if name not in evaluation.metrics})
    return evaluation


class TrainedOnOtherData(RuntimeError):
    """The prepared data is not the data the model was trained on."""
    bad_input = True  # evaluating again changes nothing until the data is put back


def check_trained_on(model_dir: Path, data_dir: Path) -> None:
    """Refuse to evaluate a model on data other than it was trained on (restored or re-prepared since)."""
    from trainer.prepared_data import read_manifest
    trained_on = read_config(model_dir / CONFIG_FILE_NAME).job.data_fingerprint
    now = read_manifest(data_dir)["fingerprint"]
    if trained_on != now:
        raise TrainedOnOtherData(f"the prepared data changed since the model was trained (fingerprint {now[:12]}, "
                                 f"trained on {trained_on[:12]}): put that data back (python -m tasks restore "
                                 f"--run-id RUN) or train again")


def split_hash(manifest: dict[str, Any], split: str = "test") -> str:
    """Identifies the records of a split: a digest of its shards' sha256 (what the gate compares on)."""
    shards = "".join(shard["sha256"] for shard in manifest["splits"][split]["shards"])
    return hashlib.sha256(shards.encode()).hexdigest()[:16]


def accuracy_on_split(predict: Callable[[np.ndarray], np.ndarray], data_dir: Path,
                      input_shape: tuple[int, int, int], num_classes: int, split: str = "test") -> float | None:
    """Accuracy of any model's class probabilities over a whole split, its images at input_shape (resized when
    needed); None when the model predicts another number of classes."""
    from trainer.data import rank_dataset
    from trainer.prepared_data import read_manifest
    correct = total = 0
    for images, labels in rank_dataset(data_dir, read_manifest(data_dir), split, batch_size=256,
                                       input_shape=input_shape):
        probabilities = predict(images.numpy())
        if probabilities.shape[-1] != num_classes:
            return None
        correct += int((probabilities.argmax(axis=-1) == labels.numpy()).sum())
        total += len(labels)
    return correct / total if total else None


def outputs_on_split(predict: Callable[[np.ndarray], np.ndarray], data_dir: Path, input_shape: tuple[int, ...],
                     task: str, split: str = "test") -> tuple[np.ndarray, np.ndarray] | None:
    """(outputs, targets) of any model over a whole split (images at input_shape, resized when needed; tensor
    data as it is); None when the model's outputs do not fit the task's (another number of classes or targets)."""
    from trainer.data import rank_dataset
    from trainer.prepared_data import output_size, read_manifest
    manifest = read_manifest(data_dir)
    size = output_size(manifest, task)
    outputs, targets = [], []
    for inputs, batch_targets in rank_dataset(data_dir, manifest, split, batch_size=256, input_shape=input_shape,
                                              task=task):
        given = np.asarray(predict(inputs.numpy()), np.float64)
        if given.ndim != 2 or given.shape[-1] != size:
            return None
        outputs.append(given)
        targets.append(batch_targets.numpy())
    if not outputs:
        return None
    return np.concatenate(outputs), np.concatenate(targets)
