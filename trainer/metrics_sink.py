"""Rank 0's metrics leave the process as output lines: the launcher, which reads every line of the job, logs them to
the run's MLflow run. So no training process needs to reach MLflow, wherever it runs."""
from __future__ import annotations

import json
from typing import Callable

METRICS_LINE_PREFIX = "ringflow_metrics "  # followed by {"epoch": N, "metrics": {...}} on one line


def metrics_line(epoch: int, metrics: dict[str, float]) -> str:
    """One epoch's metrics as the line the launcher relays to MLflow."""
    return METRICS_LINE_PREFIX + json.dumps({"epoch": epoch, "metrics": metrics})


def print_epoch_metrics(epoch: int, metrics: dict[str, float]) -> None:
    print(metrics_line(epoch, metrics), flush=True)


def metric_sink() -> Callable[[int, dict[str, float]], None]:
    """What the reporting process hands each epoch's metrics to."""
    return print_epoch_metrics
