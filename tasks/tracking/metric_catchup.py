"""The epochs a job spooled (trainer/metric_log) that its MLflow run lacks, logged when the job has ended: what rank 0
or the relay could not send while the tracking server was away, or sent too late to see before it exited."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from tasks.tracking import mlflow_store
from trainer.metric_log import SPOOL_FILE, Spooled, read_spool


def missing_metrics(run_id: str, spooled: list[Spooled]) -> dict[int, tuple[dict[str, float], int]]:
    """By epoch, the spooled values whose (key, epoch) the run has no value for, with their timestamp (the last
    spooled epoch wins: a resumed job trains it again)."""
    client = mlflow_store.client()
    keys = {key for _, metrics, _ in spooled for key in metrics}
    logged = {key: {metric.step for metric in client.get_metric_history(run_id, key)} for key in keys}
    missing: dict[int, tuple[dict[str, float], int]] = {}
    for epoch, metrics, stamp in spooled:
        lacking = {key: value for key, value in metrics.items() if epoch not in logged[key]}
        if lacking:
            missing[epoch] = (lacking, stamp)
    return missing


def log_spooled_metrics(run_id: str, checkpoint_dir: Path) -> int:
    """Log what the run lacks of its job's spool; how many epochs that touched."""
    missing = missing_metrics(run_id, read_spool(checkpoint_dir / SPOOL_FILE))
    for epoch, (metrics, stamp) in sorted(missing.items()):
        mlflow_store.log_metrics(run_id, metrics, epoch, stamp)
    return len(missing)


@contextlib.contextmanager
def catching_up_metrics(run_id: str, checkpoint_dir: Path) -> Iterator[None]:
    """After the block (a training job), the spooled epochs the run lacks are logged. When the block failed, its
    error is the one that goes on (a catch-up that fails too, the tracking server still away, is left for the
    retry or the resume, which catch up again)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            log_spooled_metrics(run_id, checkpoint_dir)
        raise
    log_spooled_metrics(run_id, checkpoint_dir)
