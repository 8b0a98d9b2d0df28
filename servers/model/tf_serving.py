"""TensorFlow Serving's REST contract beyond `:predict` on the latest version: a version named by number
(`/versions/N`) or by label (`/labels/champion`), its status, its metadata (the SavedModel's signature defs, as
TensorFlow Serving writes them), and the errors' words and codes when the model, version or label is not served."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from servers.model.champion import Champion
from servers.model.protocol import Refused
from servers.model.served_model import ServedModel
from tasks.tracking.model_registry import CHAMPION

PREDICT_METHOD = "tensorflow/serving/predict"


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


def servable(champion: Champion, served_name: str, model_name: str, version: str | None = None,
             label: str | None = None) -> ServedModel:
    """The version a request names (the latest: the one answering now), or Refused 404 in TensorFlow Serving's
    words when this server does not serve it."""
    model = champion.current()
    if model_name != served_name:
        asked = f"Specific({model_name}, {version})" if version is not None else f"Latest({model_name})"
        raise Refused(404, f"Servable not found for request: {asked}; this server serves {served_name}")
    if label is not None and label != CHAMPION:
        raise Refused(404, f"Unrecognized servable version label: {label} (this server serves {CHAMPION})")
    if version is not None and version != model.version:
        loading = " (being loaded)" if version == champion.loading else ""
        raise Refused(404, f"Servable not found for request: Specific({model_name}, {version}){loading}; "
                           f"version {model.version} answers")
    return model


def version_status(champion: Champion, version: str | None) -> dict[str, Any]:
    """TensorFlow Serving's model status: every version (the one answering, one being loaded), or the one asked."""
    ok = {"error_code": "OK", "error_message": ""}
    versions = [{"version": champion.model.version, "state": "AVAILABLE", "status": ok}]
    if champion.loading:
        versions.insert(0, {"version": champion.loading, "state": "LOADING", "status": ok})
    return {"model_version_status": [entry for entry in versions if version in (None, entry["version"])]}


def metadata(model: ServedModel) -> dict[str, Any]:
    """GET .../metadata: the version and its signature defs."""
    return {"model_spec": {"name": model.name, "signature_name": "", "version": model.version},
            "metadata": {"signature_def": {"signature_def": model.signatures}}}
