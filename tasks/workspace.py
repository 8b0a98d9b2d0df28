"""A run's own workspace: everything one pipeline run makes lives under outputs/runs/<MLflow run id>/, so runs never
share a model, checkpoints, evaluation or SavedModel. The fixed paths users look for (outputs/model, ...) are
published copies of one finished run's workspace (tasks/outputs/publish.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.paths import OUTPUTS_DIR

RUNS_DIR = OUTPUTS_DIR / "runs"


def _inside(name: str) -> property:
    """A path inside the workspace, by name."""
    return property(lambda workspace: workspace.root / name, doc=f"<workspace>/{name}")


@dataclass(frozen=True)
class RunWorkspace:
    """The directory of one MLflow run's outputs."""
    run_id: str
    runs_dir: Path = RUNS_DIR

    @property
    def root(self) -> Path:
        return self.runs_dir / self.run_id

    model_dir = _inside("model")
    checkpoint_dir = _inside("checkpoints")
    evaluation_dir = _inside("evaluation")
    savedmodel_dir = _inside("savedmodel")
    metrics_file = _inside("metrics.json")
    gate_file = _inside("gate.json")
    training_lock = _inside(".training.lock")  # held while the run trains: a live run is never resumed twice

    def training_history(self) -> dict[str, list[Any]]:
        """Per-epoch metrics of the run's training (from the trained model's summary)."""
        from trainer.model_io import read_train_summary
        return read_train_summary(self.model_dir)["history"]
