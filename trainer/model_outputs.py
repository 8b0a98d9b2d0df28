"""What the lead process writes beside the trained model for the steps after the training, where the model, the data
and the accelerator already are: the test split's outputs (a classifier's probabilities, a regressor's predictions)
and targets, with the Keras metrics of train.metrics over them (evaluate scores them), the SavedModel with its
serving signatures (an image model's float and bytes ones; a tensor model's float one, "x" -> "predictions") and a
sample of test inputs with the model's outputs for them and the SavedModel's, reloaded from its files (export
publishes it when they agree; register takes its input example from them). The steps after the training then need
no TensorFlow in the pipeline's process.

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
from trainer.prepared_data import data_kind, data_task, output_size
from trainer.reference import write_reference

TEST_PREDICTIONS = "test_predictions.npz"  # the whole test split: classification: probabilities [N, classes]
# (float32), labels [N]; regression: predictions [N, k] (float32), targets [N, k]
PARITY_SAMPLE = "parity_sample.npz"  # images [<=256, *input shape] (float32; images 0..255, or tensor data's
# features), the model's outputs for them (key "probabilities", whatever the task) and the reloaded SavedModel's
# ("reloaded")
SAVEDMODEL = "savedmodel"
SIGNATURE = "serving_default"
PARITY_IMAGES = 256
BATCH = 256


def serving_function(savedmodel: str | Path) -> Any:
    """The SavedModel's `serving_default` signature, loaded from its files by tf.saved_model.load: the functions and
    variables it holds, none of the Python objects that made it (a model server's view of it)."""
    import tensorflow as tf
    return tf.saved_model.load(str(savedmodel)).signatures[SIGNATURE]


def input_of(serve: Any) -> tuple[str, tuple[int, ...]]:
    """The name and one example's shape of the signature's one input ("images" or "x")."""
    ((name, spec),) = serve.structured_input_signature[1].items()
    return name, tuple(spec.shape[1:])


def outputs_of(serve: Any, batch: np.ndarray, output: str = "") -> np.ndarray:
    """The signature's `output` for a batch (by default "predictions" of a tensor model, else "probabilities")."""
    import tensorflow as tf
    name, _ = input_of(serve)
    answer = serve(**{name: tf.constant(batch, tf.float32)})
    return answer[output or ("predictions" if "predictions" in answer else "probabilities")].numpy()


def reloaded_outputs(savedmodel: Path, inputs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The outputs of the SavedModel reloaded from its files for `inputs`, in the trained model's `shape`: the lead
    process checks its reload right after writing it (a fresh process cost every run a TensorFlow import)."""
    serve = serving_function(savedmodel)
    if not len(inputs):
        return np.zeros(shape, np.float32)
    return outputs_of(serve, inputs).reshape(shape)


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


def write_tensor_savedmodel(model: Any, path: Path, feature_shape: tuple[int, ...], task: str) -> None:
    """Save a Keras model of tensor data with its `serving_default` signature: float32 features [None,
    *feature_shape] (input "x") -> "predictions" (the model's outputs; classification also "probabilities" and
    "classes", as image models give)."""
    import tensorflow as tf
    spec = tf.TensorSpec([None, *feature_shape], tf.float32, name="x")

    @tf.function(input_signature=[spec], autograph=False)
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        outputs = tf.cast(model(x, training=False), tf.float32)
        if task != "classification":
            return {"predictions": outputs}
        return {"predictions": outputs, "probabilities": tf.identity(outputs),
                "classes": tf.argmax(outputs, axis=-1)}

    holder = tf.Module()
    holder.model_variables = list(model.variables)
    tf.saved_model.save(holder, str(path), signatures={SIGNATURE: serve})


def split_predictions(model: Any, data_dir: Path, manifest: dict[str, Any], split: str,
                      input_shape: tuple[int, ...], task: str = "classification"
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(outputs [N, classes or targets], targets (class ids [N] or values [N, k]), the first batch's inputs) of
    the model over a whole split."""
    from trainer.data import rank_dataset
    outputs: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    first_inputs = np.zeros((0, *input_shape), np.float32)
    for inputs, batch_targets in rank_dataset(data_dir, manifest, split, batch_size=BATCH, input_shape=input_shape,
                                              task=task):
        if not outputs:
            first_inputs = inputs.numpy()
        given = np.asarray(model(inputs, training=False), np.float32)
        outputs.append(given.reshape(len(given), -1))
        targets.append(batch_targets.numpy())
    if task != "classification":
        k = output_size(manifest, task)
        if not outputs:
            return np.zeros((0, k), np.float32), np.zeros((0, k), np.float32), first_inputs
        return np.concatenate(outputs), np.concatenate(targets).astype(np.float32).reshape(-1, k), first_inputs
    if not outputs:
        return np.zeros((0, manifest["num_classes"]), np.float32), np.zeros(0, np.int64), first_inputs
    return np.concatenate(outputs), np.concatenate(targets).astype(np.int64), first_inputs


def model_task(model_dir: Path, manifest: dict[str, Any]) -> str:
    """The task the model in model_dir was trained for: its spec's, else train.task of its job's configuration
    resolved against the data (data_task), else the data's own."""
    from trainer.config import CONFIG_FILE_NAME, read_config
    spec = read_spec(model_dir)
    if spec.get("task"):
        return str(spec["task"])
    config = Path(model_dir) / CONFIG_FILE_NAME
    return data_task(manifest, read_config(config).train.task if config.is_file() else "auto")


def train_metric_names(model_dir: Path) -> list[str]:
    """train.metrics of the model's job (none without its configuration)."""
    from trainer.config import CONFIG_FILE_NAME, read_config
    config = Path(model_dir) / CONFIG_FILE_NAME
    return list(read_config(config).train.metrics) if config.is_file() else []


def loss_name(model_dir: Path, task: str) -> str | None:
    """The Keras loss the model trained with (the task's default, or train.loss by name); None: the user's own."""
    from trainer.config import CONFIG_FILE_NAME, read_config
    config = Path(model_dir) / CONFIG_FILE_NAME
    return keras_loss_name(read_config(config).train.loss if config.is_file() else None, task)


def keras_loss_name(loss: str | None, task: str) -> str | None:
    """train.loss as Keras names it: the task's default when unset; None for the user's own (an import path)."""
    from trainer.config import IMPORT_PATH
    if loss is None:
        return "sparse_categorical_crossentropy" if task == "classification" else "mse"
    return None if IMPORT_PATH.fullmatch(loss) else loss


SPARSE_NAMES = {"accuracy": "sparse_categorical_accuracy", "acc": "sparse_categorical_accuracy",
                "crossentropy": "sparse_categorical_crossentropy", "ce": "sparse_categorical_crossentropy",
                "top_k_categorical_accuracy": "sparse_top_k_categorical_accuracy"}  # class ids, as compile reads them


def keras_metric_values(names: list[str], targets: np.ndarray, outputs: np.ndarray, task: str) -> dict[str, float]:
    """Each Keras metric (or loss) by name over the whole split's targets and outputs; a name Keras cannot compute
    on them is left out."""
    import tensorflow as tf
    values: dict[str, float] = {}
    for name in names:
        keras_name = SPARSE_NAMES.get(name, name) if task == "classification" else name
        try:
            metric = tf.keras.metrics.get(keras_name)
        except ValueError:
            try:
                metric = tf.keras.losses.get(keras_name)
            except ValueError:
                continue
        try:
            if isinstance(metric, type):
                metric = metric()
            if isinstance(metric, tf.keras.metrics.Metric):
                metric.update_state(targets, outputs)
                values[name] = float(metric.result().numpy())
            else:
                values[name] = float(np.mean(np.asarray(metric(targets, outputs))))
        except (ValueError, TypeError, tf.errors.InvalidArgumentError):
            continue
    return values


def extra_metrics(model_dir: Path, task: str, targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """train.metrics by their Keras names, and (regression) "loss": the training's Keras loss, over the split."""
    if not len(targets):
        return {}
    extra = keras_metric_values(train_metric_names(model_dir), targets, outputs, task)
    loss = loss_name(model_dir, task) if task != "classification" else None
    if loss and (value := keras_metric_values([loss], targets, outputs, task).get(loss)) is not None:
        extra["loss"] = value
    return extra


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
    spec, task = read_spec(model_dir), model_task(model_dir, manifest)
    input_shape = tuple(spec["input_shape"])
    outputs, targets, inputs = split_predictions(model, data_dir, manifest, "test", input_shape, task)
    tmp = model_dir / f".tmp-{SAVEDMODEL}"
    shutil.rmtree(tmp, ignore_errors=True)
    class_names = spec.get("classes") or [str(index) for index in range(spec.get("num_classes", 0))]
    if data_kind(manifest) == "tensor":
        write_tensor_savedmodel(model, tmp, input_shape, task)
    else:
        write_savedmodel(model, tmp, class_names, input_shape)
    shutil.rmtree(model_dir / SAVEDMODEL, ignore_errors=True)
    os.replace(tmp, model_dir / SAVEDMODEL)
    write_reference(model_dir, data_dir, manifest, outputs, task, class_names)
    sample = inputs[:PARITY_IMAGES]
    reloaded = reloaded_outputs(model_dir / SAVEDMODEL, sample, outputs[:len(sample)].shape)
    _save_npz(model_dir / PARITY_SAMPLE, images=sample, probabilities=outputs[:len(sample)], reloaded=reloaded)
    extra = extra_metrics(model_dir, task, targets, outputs)
    names, values = np.array(list(extra), dtype=str), np.array(list(extra.values()), np.float64)
    if task == "classification":
        _save_npz(model_dir / TEST_PREDICTIONS, probabilities=outputs, labels=targets, metric_names=names,
                  metric_values=values)
    else:
        _save_npz(model_dir / TEST_PREDICTIONS, predictions=outputs, targets=targets, metric_names=names,
                  metric_values=values)


if __name__ == "__main__":  # python -m trainer.model_outputs MODEL_DIR DATA_DIR: for a model trained without them
    import sys

    from trainer.lean_imports import skip_unused_libraries
    from trainer.prepared_data import read_manifest
    skip_unused_libraries()
    write_model_outputs(Path(sys.argv[1]), Path(sys.argv[2]), read_manifest(Path(sys.argv[2])))
