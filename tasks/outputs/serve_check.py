"""Load SavedModels with tf.saved_model.load and run their serving signature: the fresh process of export's reload
check (and of register's scoring of the champion).

python -m tasks.outputs.serve_check, then one JSON request per line on its standard input, each answered by one
line that starts with ANSWER:
  {"ask": "predict", "savedmodel": DIR, "images": "IMAGES.npy", "out": "OUT.npy"} -> null (probabilities in OUT)
  {"ask": "accuracy", "savedmodel": DIR, "data_dir": DIR} -> the test split's accuracy, or null when the model
  cannot score it (other input channels or classes)
  {"ask": "build", "model": NAME, "source": FILE|null, "input_shape": [...], "outputs": N, "model_args": {...},
   "loss": NAME|null, "loss_source": FILE|null} -> null, or the one line that says why the user's model (or
  loss) cannot be built for the data (the preflight's check, on the CPU, before any rank starts)

The process imports TensorFlow first and then waits for a request, so that it can be started before the SavedModel
exists (its start overlaps the training); end of input: it ends.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ANSWER = "answer: "


def serving_function(savedmodel: str) -> Any:
    import tensorflow as tf

    from trainer.model_outputs import SIGNATURE
    return tf.saved_model.load(savedmodel).signatures[SIGNATURE]


def predict(savedmodel: str, images: str, out: str) -> None:
    """Class probabilities from the `serving_default` signature, for the images saved in `images`, into `out`."""
    import tensorflow as tf
    serve = serving_function(savedmodel)
    np.save(out, serve(images=tf.constant(np.load(images), tf.float32))["probabilities"].numpy())


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


def build(model: str, source: str | None, input_shape: list[int], outputs: int, model_args: dict[str, Any],
          loss: str | None, loss_source: str | None) -> str | None:
    """Why the model (built once, here on the CPU) or the loss cannot serve the job, in one line; None: they can."""
    from trainer.config import IMPORT_PATH
    from trainer.models import ModelCodeError, build_model, user_function
    try:
        build_model(model, tuple(input_shape), outputs, model_args, Path(source) if source else None)
        if loss and IMPORT_PATH.fullmatch(loss):
            user_function(loss, Path(loss_source) if loss_source else None)
    except ModelCodeError as error:
        return str(error)
    return None


REQUESTS: dict[str, Callable[..., Any]] = {"predict": predict, "accuracy": accuracy, "build": build}


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
