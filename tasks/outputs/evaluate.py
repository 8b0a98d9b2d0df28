"""evaluate: test loss, accuracy (top-5 with more than 10 classes), per-class precision/recall, confusion matrix,
scored from the test split's probabilities the training's lead process wrote beside the model."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
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
    confusion: np.ndarray  # [true class, predicted class] counts
    class_names: list[str]


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


class NoTestPredictions(RuntimeError):
    """The model directory lacks the test predictions its training writes."""
    bad_input = True


def test_predictions(model_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities [N, classes], labels [N]) the lead process wrote over the whole test split."""
    path = Path(model_dir) / TEST_PREDICTIONS
    if not path.is_file():
        raise NoTestPredictions(f"no test predictions: {path} is missing (its training wrote none: train again)")
    with np.load(path) as saved:
        return saved["probabilities"].astype(np.float64), saved["labels"]


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
    probabilities, labels = test_predictions(model_dir)
    return score(probabilities, labels, [str(name) for name in read_manifest(data_dir)["classes"]])


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
