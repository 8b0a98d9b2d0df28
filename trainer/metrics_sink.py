"""Rank 0's link to MLflow: metrics go to the run the launching task created (MLFLOW_RUN_ID)."""
from __future__ import annotations

import os
import time
from typing import Callable


def mlflow_metric_sink() -> Callable[[int, dict[str, float]], None] | None:
    """A function logging one epoch's metrics to the run in MLFLOW_RUN_ID, or None when there is none."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return None
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    client = MlflowClient()

    def log_epoch(epoch: int, metrics: dict[str, float]) -> None:
        stamp = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(key, value, stamp, epoch) for key, value in metrics.items()])

    return log_epoch
