"""TensorFlow Serving's REST contract beyond `:predict` on the latest version: a version named by number
(`/versions/N`) or by label (`/labels/champion`, `/labels/challenger`), its status, its metadata (the SavedModel's
signature defs, as TensorFlow Serving writes them), `:classify` for a classifier, and the errors' words and codes
when the model, version or label is not served."""
from __future__ import annotations

from typing import Any

from servers.model.champion import Champion
from servers.model.protocol import Inputs, Refused, counted, decoded_b64
from servers.model.served_model import Answer, ServedModel
from tasks.tracking.model_registry import CHALLENGER

PREDICT_METHOD = "tensorflow/serving/predict"


def servable(champion: Champion, served_name: str, model_name: str, version: str | None = None,
             label: str | None = None) -> ServedModel:
    """The version a request names (by number, or by label: champion, challenger; none: the champion), or Refused
    404 in TensorFlow Serving's words when this server does not serve it."""
    if model_name != served_name:
        asked = f"Specific({model_name}, {version})" if version is not None else f"Latest({model_name})"
        raise Refused(404, f"Servable not found for request: {asked}; this server serves {served_name}")
    if label is not None:
        return labelled(champion, label)
    if version is None:
        return champion.current()
    if (model := champion.of_version(version)) is None:
        loading = " (being loaded)" if version == champion.loading else ""
        answering = ", ".join(served.version for served in champion.versions())
        raise Refused(404, f"Servable not found for request: Specific({model_name}, {version}){loading}; "
                           f"version {answering} answers")
    return model


def labelled(champion: Champion, label: str) -> ServedModel:
    """The version that answers as `label`, or Refused 404 saying which labels this server serves."""
    if (model := champion.labelled(label)) is not None:
        return model
    served = " and ".join(champion.served_labels)
    if label in champion.served_labels:
        raise Refused(404, f"Unrecognized servable version label: {label} (no version holds the alias {label} now)")
    hint = f" (serving.challenger: true serves the {CHALLENGER} too)" if label == CHALLENGER else ""
    raise Refused(404, f"Unrecognized servable version label: {label} (this server serves {served}){hint}")


def version_status(champion: Champion, version: str | None) -> dict[str, Any]:
    """TensorFlow Serving's model status: every version (those answering, one being loaded), or the one asked."""
    ok = {"error_code": "OK", "error_message": ""}
    versions = [{"version": model.version, "state": "AVAILABLE", "status": ok} for model in champion.versions()]
    if champion.loading:
        versions.insert(0, {"version": champion.loading, "state": "LOADING", "status": ok})
    return {"model_version_status": [entry for entry in versions if version in (None, entry["version"])]}


def metadata(model: ServedModel) -> dict[str, Any]:
    """GET .../metadata: the version and its signature defs."""
    return {"model_spec": {"name": model.name, "signature_name": "", "version": model.version},
            "metadata": {"signature_def": {"signature_def": model.signatures}}}


def classify_inputs(document: Any, max_instances: int, image_shape: tuple[int, ...]) -> Inputs:
    """The images of a classify request: `examples`, each an object whose one feature is an encoded image
    (`{"image": {"b64": ...}}`); `context` features are refused (an image model has no shared features)."""
    if not isinstance(document, dict) or not isinstance(document.get("examples"), list) or not document["examples"]:
        raise Refused(400, "the body is a JSON object with \"examples\": a non-empty list of objects, each with "
                           "one feature holding an image ({\"image\": {\"b64\": ...}})")
    if document.get("context"):
        raise Refused(400, "\"context\": this model's examples have one feature, the image, and no shared ones")
    counted(len(document["examples"]), max_instances)
    return Inputs([decoded_b64(example, f"example {index}") for index, example in enumerate(document["examples"])],
                  None)


def classify_answer(answer: Answer, class_names: list[str]) -> dict[str, Any]:
    """TensorFlow Serving's classify response: per example, every class with its score; Refused (400) naming the
    first example whose image could not be used (a classification has no per-example error)."""
    for index, error in enumerate(answer.errors):
        if error:
            raise Refused(400, f"example {index}: {error}")
    return {"results": [[[name, float(score)] for name, score in zip(class_names, scores)]
                        for scores in answer.scores]}
