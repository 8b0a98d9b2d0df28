"""Whether a training spent much of each step averaging its gradients, and what would spend less: said after the
training and tagged on its run. The figures are the ranks' own (trainer/communication.py, in the training's
summary)."""
from __future__ import annotations

from typing import Any

HIGH_SHARE = 0.25  # of a step spent averaging the gradients: from here on, the line and the tag
COMMUNICATION_TAG = "ringflow.communication"


def communication_figures(summary: dict[str, Any]) -> dict[str, float]:
    """The training's averaging figures as metrics (none when they were not measured)."""
    measured = summary.get("communication") or {}
    return {key: float(measured[key]) for key in ("allreduce_ms", "step_ms", "allreduce_share") if key in measured}


def communication_advice(summary: dict[str, Any], batch_size: int) -> str | None:
    """One line when averaging took a high share of each step, with the settings that would help; else None."""
    measured = summary.get("communication")
    if not measured or measured["allreduce_share"] < HIGH_SHARE:
        return None
    size = measured["gradient_bytes"]
    shown = f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 2**10:.1f} KB"
    return (f"communication: averaging the gradients ({shown}) took "
            f"{measured['allreduce_ms']:.1f} ms of each {measured['step_ms']:.1f} ms step "
            f"({measured['allreduce_share']:.0%}) across {summary['world_size']} ranks; less of it with a larger "
            f"batch per replica (train.batch_size {batch_size} -> {4 * batch_size}), fewer ranks per host, fp16 "
            "gradients (train.fp16_allreduce) or gradients accumulated over steps in the model's own train_step")
