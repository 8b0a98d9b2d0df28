"""The launcher's side of rank 0's metric lines: each epoch's metrics into the run's MLflow run, the line itself
kept from the console (the epoch line says the same for people)."""
from __future__ import annotations

import json
from typing import Callable

from tasks.tracking import mlflow_store
from trainer.metrics_sink import METRICS_LINE_PREFIX


def relay_metrics(run_id: str | None, on_line: Callable[[str], None]) -> Callable[[str], None]:
    """An on_line that logs metric lines (horovodrun's `[0]<stdout>:` prefix and all) to `run_id` and passes every
    other line to `on_line`."""

    def handle(line: str) -> None:
        start = line.find(METRICS_LINE_PREFIX)
        if start < 0:
            on_line(line)
            return
        if run_id is None:
            return
        try:
            report = json.loads(line[start + len(METRICS_LINE_PREFIX):])
        except json.JSONDecodeError:  # a line cut short by a dying process
            on_line(line)
            return
        mlflow_store.log_metrics(run_id, report["metrics"], step=report["epoch"])

    return handle
