"""A trained model's directory: its spec (the catalog's or the user's builder, its arguments, shapes) + weights
(rebuilt without Horovod or a strategy), the job's copy of the user's model file, and the training summary the lead
process writes beside them."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainer.models import build_model

MODEL_SPEC = "model.json"
MODEL_WEIGHTS = "model.weights.h5"
TRAIN_SUMMARY = "train_summary.json"  # sizes, resolved rates and the per-epoch history of the training


def save_model(model: Any, spec: dict[str, Any], out_dir: Path) -> None:
    """Weights plus the spec that rebuilds the model, each written to a temporary name then renamed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_weights = out_dir / f".tmp-{MODEL_WEIGHTS}"
    model.save_weights(str(tmp_weights))
    os.replace(tmp_weights, out_dir / MODEL_WEIGHTS)
    tmp_spec = out_dir / f".tmp-{MODEL_SPEC}"
    tmp_spec.write_text(json.dumps(spec, indent=2))
    os.replace(tmp_spec, out_dir / MODEL_SPEC)


def read_spec(model_dir: Path) -> dict[str, Any]:
    """The spec saved beside the weights; a clear error when there is no trained model."""
    path = Path(model_dir) / MODEL_SPEC
    if not path.is_file():
        raise FileNotFoundError(f"no trained model: {path} is missing (run the train step)")
    return json.loads(path.read_text())


def source_in(source: Path | None, job_dir: Path) -> str | None:
    """Where the job's copy of the user's model file lies in its model directory (None: no file)."""
    return str(source.relative_to(job_dir)) if source else None


def load_model(model_dir: Path) -> Any:
    """Rebuild a trained model from its spec (the user's builder from the copy of its file beside it) and weights."""
    spec = read_spec(model_dir)
    source = Path(model_dir) / spec["model_source"] if spec.get("model_source") else None
    model = build_model(spec["model"], tuple(spec["input_shape"]), spec.get("outputs", spec["num_classes"]),
                        spec.get("model_args"), source)
    model.load_weights(str(Path(model_dir) / MODEL_WEIGHTS))
    return model


def write_train_summary(summary: dict[str, Any], out_dir: Path) -> None:
    """The training summary, written to a temporary name then renamed."""
    tmp = Path(out_dir) / f".tmp-{TRAIN_SUMMARY}"
    tmp.write_text(json.dumps(summary, indent=2))
    os.replace(tmp, Path(out_dir) / TRAIN_SUMMARY)


def read_train_summary(model_dir: Path) -> dict[str, Any]:
    """What the lead process reported about the training of the model in model_dir."""
    path = Path(model_dir) / TRAIN_SUMMARY
    if not path.is_file():
        raise FileNotFoundError(f"no training summary: {path} is missing (run the train step)")
    return json.loads(path.read_text())


def steady_images_per_sec(history: dict[str, list[float]]) -> float:
    """Mean images/sec over the epochs after the first (which includes tracing and warm-up); 0 without any."""
    per_epoch = history.get("images_per_sec", [])
    steady = per_epoch[1:] or per_epoch
    return sum(steady) / len(steady) if steady else 0.0
