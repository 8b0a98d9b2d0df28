"""Where things live in a ringflow checkout (the repo root holds code, data and the MLflow store)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARAMS_FILE = ROOT / "params.yaml"
PREPARED_DIR = ROOT / "data" / "prepared"
OUTPUTS_DIR = ROOT / "outputs"
MODEL_DIR = OUTPUTS_DIR / "model"
SAVEDMODEL_DIR = OUTPUTS_DIR / "savedmodel"
METRICS_FILE = OUTPUTS_DIR / "metrics.json"
MLRUNS_DIR = ROOT / "mlruns"
GATE_FILE = OUTPUTS_DIR / "gate.json"
EVALUATION_DIR = OUTPUTS_DIR / "evaluation"
LOCKS_DIR = OUTPUTS_DIR / ".locks"  # flock files: one preparer, one DVC command, one publisher at a time


def resolve_path(argument: str) -> Path:
    """A path as a parameter gives it: relative paths are taken from the repo root."""
    path = Path(argument).expanduser()
    return path if path.is_absolute() else ROOT / path
