"""Where rank 0's epoch metrics go: to the launcher, as output lines (`ringflow_metrics {...}`) that it logs to the
run's MLflow run, so no rank imports MLflow or holds a tracking server's credentials. Where rank 0 shares the
launcher's filesystem (METRICS_SPOOL_ENV set), each epoch is first written to the spool beside the checkpoints
(trainer/metric_log), so an epoch that was checkpointed is logged even when the launcher died before reading it:
the retry or the resume logs what the spool holds and the run lacks."""
from __future__ import annotations

import os
import time
from typing import Callable

from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE, append_to_spool
from trainer.protocol import METRICS_SPOOL_ENV, metrics_line


def print_epoch_metrics(epoch: int, metrics: dict[str, float]) -> None:
    print(metrics_line(epoch, metrics), flush=True)


def metric_sink(job: JobSpec) -> Callable[[int, dict[str, float]], None]:
    """What the reporting process hands each epoch's metrics to (before the epoch's checkpoint)."""
    if not os.environ.get(METRICS_SPOOL_ENV):
        return print_epoch_metrics
    spool = job.checkpoint_dir / SPOOL_FILE

    def spool_and_print(epoch: int, metrics: dict[str, float]) -> None:
        append_to_spool(spool, epoch, metrics, int(time.time() * 1000))  # on disk before the line leaves
        print_epoch_metrics(epoch, metrics)

    return spool_and_print
