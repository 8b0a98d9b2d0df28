"""The launcher's side of rank 0's metric lines: each epoch's metrics into the run's MLflow run, in the spool first
(rank 0 wrote it there when it shares this filesystem) and sent in the background (metric_sender), so a tracking
server that is away a while holds up no output line and loses no epoch; the line itself is kept from the console
(the epoch line says the same for people)."""
from __future__ import annotations

from typing import Callable

from tasks.launch.output.metric_sender import BackgroundMetricLog
from tasks.tracking import mlflow_store
from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE
from trainer.protocol import CutShort, parse_metrics_line


class MetricRelay:
    """An on_line that logs metric lines (horovodrun's `[0]<stdout>:` prefix and all) to `run_id` and passes every
    other line to `on_line`; close() when the job has ended."""

    def __init__(self, run_id: str | None, job: JobSpec, on_line: Callable[[str], None],
                 spooled_by_rank: bool = False) -> None:
        self._on_line = on_line
        self._log = None if run_id is None else BackgroundMetricLog(
            lambda epoch, metrics, stamp: mlflow_store.log_metrics(run_id, metrics, epoch, stamp),
            job.checkpoint_dir / SPOOL_FILE, job.metrics_retry_seconds, spooled_already=spooled_by_rank)

    def __call__(self, line: str) -> None:
        try:
            report = parse_metrics_line(line)
        except CutShort:  # a line cut short by a dying process
            self._on_line(line)
            return
        if report is None:
            self._on_line(line)
        elif self._log is not None:
            self._log(*report)

    def close(self) -> None:
        """Wait until the metrics are sent, or only in the spool (the run's catch-up logs those)."""
        if self._log is not None:
            self._log.close()
