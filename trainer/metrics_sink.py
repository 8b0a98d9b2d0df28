"""Where rank 0's epoch metrics go. With the launcher's filesystem (MLFLOW_RUN_ID given): into the run as each epoch
ends, through a spool and a background sender (trainer/metric_log), so the epochs a run checkpointed are logged even
when the launcher died first or the tracking server was away. On a host without it: as output lines
(`ringflow_metrics {...}`) that the launcher logs, so such a host never needs to reach MLflow."""
from __future__ import annotations

import atexit
import json
import os
from typing import Callable

from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE, BackgroundMetricLog
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


def mlflow_epoch_logger(run_id: str) -> Callable[[int, dict[str, float], int], None]:
    """Each epoch's metrics into the MLflow run `run_id` (the store in MLFLOW_TRACKING_URI)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    load_tracking_settings()
    # one try per call, answered or not in 10 s: the background sender does the retrying, in order, bounded
    os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10")
    client = MlflowClient()

    def log_epoch(epoch: int, metrics: dict[str, float], stamp: int) -> None:
        client.log_batch(run_id, metrics=[Metric(key, value, stamp, epoch) for key, value in metrics.items()])

    return log_epoch


def metric_sink(job: JobSpec) -> Callable[[int, dict[str, float]], None]:
    """What the reporting process hands each epoch's metrics to (sent, or waiting in the spool, when it exits)."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return print_epoch_metrics
    log = BackgroundMetricLog(mlflow_epoch_logger(run_id), job.checkpoint_dir / SPOOL_FILE, job.metrics_retry_seconds)
    atexit.register(log.close)
    return log
