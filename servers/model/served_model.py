"""One registered model version, loaded to answer: an image model's SavedModel's two signatures, its class names,
and the fast way to the bytes signature's answer; or a tensor model's float signature (features "x" in, its
outputs by name out)."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tasks.errors import sentence
from tasks.tracking import mlflow_store
from tasks.tracking.model_registry import CHAMPION, current_champion, verified_download
from tasks.tracking.registry_signature import Untrusted
from trainer.serving_bytes import BYTES_SIGNATURE, TOP_K


class NotServable(RuntimeError):
    """A model version that cannot be served: one line naming it and why."""
    bad_input = True


@dataclass(frozen=True)
class Answer:
    """A signature's answer, one row per image: the best class's name, every class's score, the best classes'
    indices (-1 for an image that could not be used) and why an image could not be used (empty when it could)."""
    classes: np.ndarray
    scores: np.ndarray
    top_k: np.ndarray
    errors: list[str]

    def rows(self, start: int, stop: int) -> "Answer":
        """The answer of images start..stop."""
        return Answer(self.classes[start:stop], self.scores[start:stop], self.top_k[start:stop],
                      self.errors[start:stop])


@dataclass(frozen=True)
class TensorAnswer:
    """A tensor model's answer: each output of its signature by name, one row per instance."""
    outputs: dict[str, np.ndarray]

    def rows(self, start: int, stop: int) -> "TensorAnswer":
        return TensorAnswer({name: values[start:stop] for name, values in self.outputs.items()})


@dataclass(frozen=True)
class ServedModel:
    """A loaded model version of the registry."""
    name: str
    version: str
    class_names: list[str]
    image_shape: tuple[int, ...]  # height, width, channels of serving_default's float images (a tensor model:
    # one example's feature shape)
    saved: Any  # the loaded SavedModel (it owns the variables its functions use)
    strict: Any  # the serving_bytes answer that fails on an image that does not decode (strict_classifier)
    load_seconds: float
    tensor: bool = False  # a tensor model: serving_default takes float32 features "x"
    signatures: dict[str, Any] = field(default_factory=dict)  # its signature defs, as TensorFlow Serving's metadata

    def answer(self, items: list[Any]) -> "Answer | TensorAnswer":
        """The batcher's call: encoded images classified, or a tensor model's instances (arrays) predicted."""
        return self.predict(np.stack(items)) if self.tensor else self.classify(items)

    def predict(self, features: np.ndarray) -> TensorAnswer:
        """A tensor model's `serving_default` outputs for float features [N, *image_shape]."""
        import tensorflow as tf
        answer = self.saved.signatures["serving_default"](x=tf.constant(features, tf.float32))
        return TensorAnswer({name: answer[name].numpy() for name in sorted(answer)})

    def classify(self, encoded: list[bytes]) -> Answer:
        """The `serving_bytes` signature's answer for encoded images: asked of the strict classifier, and of the
        signature itself only when an image did not decode (to say which, and answer the others)."""
        import tensorflow as tf
        images = tf.constant(encoded, tf.string)
        try:
            answer = self.strict(images)
        except tf.errors.InvalidArgumentError:  # a truncated or corrupt image among them
            answer = self.saved.signatures[BYTES_SIGNATURE](images_bytes=images)
        return Answer(answer["classes"].numpy().astype(str), answer["scores"].numpy(), answer["top_k"].numpy(),
                      [error.decode() for error in answer["errors"].numpy()])

    def classify_pixels(self, images: np.ndarray) -> Answer:
        """The `serving_default` signature's answer for float images (0..255) of image_shape."""
        import tensorflow as tf
        floats = self.saved.signatures["serving_default"]
        scores = floats(images=tf.constant(images, tf.float32))["probabilities"].numpy()
        top_k = np.argsort(-scores, axis=1, kind="stable")[:, :min(TOP_K, scores.shape[1])]
        return Answer(np.asarray(self.class_names)[top_k[:, 0]], scores, top_k, [""] * len(images))


def signature_defs(savedmodel: Path) -> dict[str, Any]:
    """The SavedModel's signature defs (its init op aside), each as TensorFlow Serving's metadata writes it: inputs
    and outputs with dtype, tensor_shape (sizes as strings, -1 for any) and tensor name, and the method."""
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((savedmodel / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0]
    return {name: json_format.MessageToDict(graph.signature_def[name], preserving_proto_field_name=True)
            for name in sorted(graph.signature_def) if not name.startswith("__")}


def strict_classifier(signatures: Any, shape: tuple[int, ...], class_names: list[str]) -> Any:
    """What the serving_bytes signature answers, from the same functions (trainer/serving_bytes.py) and the
    SavedModel's float signature, but decoding all images at once: 0.2 ms a batch, against 15-20 ms for the
    signature's tf.data pass that can leave out an image that does not decode (this fails instead)."""
    import tensorflow as tf

    from trainer.serving_bytes import classified, decoded_strictly
    floats = signatures["serving_default"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def classify(images_bytes: Any) -> Any:
        return classified(images_bytes, (shape[0], shape[1], shape[2]), class_names,
                          lambda images: floats(images=images)["probabilities"], decoded_strictly)
    return classify


def champion_version(model_name: str) -> str | None:
    """The version that holds the `champion` alias now; None when there is none."""
    version = current_champion(model_name)
    return None if version is None else str(version.version)


def aliased_versions(model_name: str) -> dict[str, str]:
    """The version each alias of the registered model is on now (one request); {} when there is no such model."""
    from mlflow.exceptions import MlflowException
    try:
        aliases = mlflow_store.client().get_registered_model(model_name).aliases
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            return {}
        raise
    return {alias: str(version) for alias, version in aliases.items()}


def load_version(model_name: str, version: str, warm_up: list[bytes]) -> ServedModel:
    """Download a version's MLflow model, check that its SavedModel is the one the pipeline signed for it
    (model_registry.verified_download) before TensorFlow reads any of it, load it and answer `warm_up` once (the
    first call of a signature builds its graph: no request waits for it). NotServable (said once: the version is
    not tried again) when the version is not the pipeline's, changed since, not ringflow's image model of today, or
    does not load; a download that fails raises whatever failed (tried again at the next poll)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ringflow-serving-") as folder:
        try:
            savedmodel, class_names = verified_download(model_name, version, Path(folder))
        except Untrusted as error:
            raise NotServable(str(error)) from None
        try:
            model = loaded(model_name, version, savedmodel, class_names, warm_up)
        except NotServable:
            raise
        except Exception as error:  # what TensorFlow cannot read or run now, it cannot at the next poll either
            raise NotServable(f"{model_name} v{version} does not load ({type(error).__name__}: "
                              f"{sentence(error)[:200]})") from None
    return replace(model, load_seconds=time.monotonic() - started)


def loaded(model_name: str, version: str, savedmodel: Path, class_names: list[str],
           warm_up: list[bytes]) -> ServedModel:
    """The verified SavedModel loaded, its signatures checked and warmed up."""
    import tensorflow as tf
    saved = tf.saved_model.load(str(savedmodel))
    signatures, defs = saved.signatures, signature_defs(savedmodel)
    inputs = signatures["serving_default"].structured_input_signature[1]
    if "x" in inputs:  # a tensor model
        shape = tuple(inputs["x"].shape[1:])
        model = ServedModel(model_name, version, class_names, shape, saved, None, 0.0, tensor=True, signatures=defs)
        model.predict(np.zeros((1, *shape), np.float32))  # its graph built before a request waits for it
        return model
    if BYTES_SIGNATURE not in signatures:
        raise NotServable(f"{model_name} v{version} has no serving_bytes signature (exported by an older ringflow): "
                          "train and register it again")
    shape = tuple(signatures["serving_default"].structured_input_signature[1]["images"].shape[1:])
    model = ServedModel(model_name, version, class_names, shape, saved,
                        strict_classifier(signatures, shape, class_names), 0.0, signatures=defs)
    model.classify(warm_up)
    saved.signatures[BYTES_SIGNATURE](images_bytes=tf.constant(warm_up))  # the way of an image that does not decode
    return model


def no_champion(model_name: str) -> str:
    """The line for a registry without a champion."""
    return (f"no version of {model_name} holds the alias {CHAMPION} in the registry at "
            f"{mlflow_store.tracking_uri()}: make run registers one")
