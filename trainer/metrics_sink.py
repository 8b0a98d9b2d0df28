"""Where rank 0's epoch metrics go. With the launcher's filesystem (MLFLOW_RUN_ID given): straight into the run,
as each epoch ends, so the epochs a run checkpointed are logged even when the launcher died first. On a host without
it: as output lines (`ringflow_metrics {...}`) that the launcher logs, so such a host never needs to reach MLflow."""
from __future__ import annotations

import json
import os
import time
from typing import Callable

from trainer.protocol import RANK_SECRETS_ENV, metrics_line


def print_epoch_metrics(epoch: int, metrics: dict[str, float]) -> None:
    print(metrics_line(epoch, metrics), flush=True)


def load_tracking_settings() -> None:
    """The tracking URI and MLFLOW_* settings from the launcher's file (never on a command line: the URI can hold a
    password) into this process's environment, where MLflow reads them."""
    secrets_file = os.environ.get(RANK_SECRETS_ENV)
    if secrets_file:
        with open(secrets_file) as handle:
            os.environ.update(json.load(handle))


def mlflow_epoch_logger(run_id: str) -> Callable[[int, dict[str, float]], None]:
    """Each epoch's metrics into the MLflow run `run_id` (the store in MLFLOW_TRACKING_URI)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    load_tracking_settings()
    client = MlflowClient()

    def log_epoch(epoch: int, metrics: dict[str, float]) -> None:
        stamp = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(key, value, stamp, epoch) for key, value in metrics.items()])

    return log_epoch


def metric_sink() -> Callable[[int, dict[str, float]], None]:
    """What the reporting process hands each epoch's metrics to."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    return mlflow_epoch_logger(run_id) if run_id else print_epoch_metrics
