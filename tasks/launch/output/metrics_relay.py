"""The launcher's side of rank 0's metric lines: each epoch's metrics into the run's MLflow run, the line itself
kept from the console (the epoch line says the same for people)."""
from __future__ import annotations

from typing import Callable

from tasks.tracking import mlflow_store
from trainer.protocol import CutShort, parse_metrics_line


def relay_metrics(run_id: str | None, on_line: Callable[[str], None]) -> Callable[[str], None]:
    """An on_line that logs metric lines (horovodrun's `[0]<stdout>:` prefix and all) to `run_id` and passes every
    other line to `on_line`."""

    def handle(line: str) -> None:
        try:
            report = parse_metrics_line(line)
        except CutShort:  # a line cut short by a dying process
            on_line(line)
            return
        if report is None:
            on_line(line)
        elif run_id is not None:
            epoch, metrics = report
            mlflow_store.log_metrics(run_id, metrics, step=epoch)

    return handle
