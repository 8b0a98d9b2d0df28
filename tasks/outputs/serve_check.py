"""Load SavedModels with tf.saved_model.load and run their serving signature: the fresh process of register's scoring
of a champion the registry holds no score of on the run's test split, of the preflight's build of a user's model,
and of export's reload check of a model whose lead process did not check it.

python -m tasks.outputs.serve_check, then one JSON request per line on its standard input, each answered by one
line that starts with ANSWER:
  {"ask": "predict", "savedmodel": DIR, "images": "IMAGES.npy", "out": "OUT.npy"} -> null (the outputs in OUT:
  an image model's probabilities, a tensor model's predictions)
  {"ask": "accuracy", "savedmodel": DIR, "data_dir": DIR} -> the test split's accuracy, or null when the model
  cannot score it (other input channels or classes)
  {"ask": "score", "savedmodel": DIR, "data_dir": DIR, "metric": NAME, "task": TASK, "loss": NAME|null} -> the
  test split's value of that test metric (the gate's), or null when the model cannot score it
  {"ask": "build", "model": NAME, "source": FILE|null, "input_shape": [...], "outputs": N, "model_args": {...},
   "loss": NAME|null, "loss_source": FILE|null, "metrics": [NAME, ...]} -> null, or the one line that says why
  the user's model (or loss, or a metric) cannot be built for the data (the preflight's check, on the CPU, before
  any rank starts)

The process imports TensorFlow first and then waits for a request, so that it can be started before the SavedModel
exists (its start overlaps the training); end of input: it ends.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from trainer.model_outputs import input_of, outputs_of, serving_function

ANSWER = "answer: "


def predict(savedmodel: str, images: str, out: str) -> None:
    """The `serving_default` signature's outputs for the inputs saved in `images`, into `out`."""
    np.save(out, outputs_of(serving_function(savedmodel), np.load(images)))


def accuracy(savedmodel: str, data_dir: str) -> float | None:
    """Accuracy of the SavedModel over the prepared test split (its images at the signature's input size)."""
    import tensorflow as tf

    from tasks.outputs.evaluate import accuracy_on_split
    from trainer.prepared_data import read_manifest
    serve = serving_function(savedmodel)
    shape = tuple(serve.structured_input_signature[1]["images"].shape[1:])
    manifest = read_manifest(Path(data_dir))
    if len(shape) != 3 or shape[2] != manifest["channels"]:
        return None
    return accuracy_on_split(lambda batch: serve(images=tf.constant(batch, tf.float32))["probabilities"].numpy(),
                             Path(data_dir), shape, manifest["num_classes"])


def score(savedmodel: str, data_dir: str, metric: str, task: str, loss: str | None = None) -> float | None:
    """The SavedModel's value of the test metric `metric` over the prepared test split, as evaluate scores the
    trained model (Keras metrics, test_<name>, computed here); None when it cannot score this data (another
    input, output or task) or the metric."""
    from tasks.outputs.evaluate import outputs_on_split, task_scores
    from trainer.model_outputs import keras_metric_values
    from trainer.prepared_data import data_kind, feature_shape, read_manifest
    serve = serving_function(savedmodel)
    manifest = read_manifest(Path(data_dir))
    name, shape = input_of(serve)
    output = "probabilities" if task == "classification" else "predictions"
    if data_kind(manifest) == "tensor":
        fits = name == "x" and shape == feature_shape(manifest)
    else:
        fits = name == "images" and len(shape) == 3 and shape[2] == manifest["channels"]
    if not fits or output not in serve.structured_outputs:
        return None
    scored = outputs_on_split(lambda batch: outputs_of(serve, batch, output), Path(data_dir), shape, task)
    if scored is None:
        return None
    metrics: dict[str, float | None] = dict(task_scores(*scored, task, manifest).metrics)
    if metric not in metrics and metric.startswith("test_"):
        keras_name = loss if metric == "test_loss" and loss else metric[len("test_"):]
        metrics[metric] = keras_metric_values([keras_name], scored[1], scored[0], task).get(keras_name)
    value = metrics.get(metric)
    return None if value is None else float(value)


def build(model: str, source: str | None, input_shape: list[int], outputs: int, model_args: dict[str, Any],
          loss: str | None, loss_source: str | None, metrics: list[str] | None = None) -> str | None:
    """Why the model (built once, here on the CPU), the loss or the metrics cannot serve the job, in one line;
    None: they can."""
    from trainer.models import ModelCodeError, build_model, check_loss_and_metrics
    try:
        build_model(model, tuple(input_shape), outputs, model_args, Path(source) if source else None)
        check_loss_and_metrics(loss, Path(loss_source) if loss_source else None, metrics or [])
    except ModelCodeError as error:
        return str(error)
    return None


REQUESTS: dict[str, Callable[..., Any]] = {"predict": predict, "accuracy": accuracy, "score": score, "build": build}


def answer_requests() -> None:
    """Each request of the standard input, answered on the standard output, until its end."""
    for line in sys.stdin:
        request = json.loads(line)
        answer = REQUESTS[request.pop("ask")](**request)
        print(ANSWER + json.dumps(answer), flush=True)


if __name__ == "__main__":
    from trainer.lean_imports import skip_unused_libraries
    skip_unused_libraries()
    import tensorflow  # noqa: F401  (while the caller trains, evaluates and asks)
    answer_requests()
