"""compare: the last N runs of an experiment side by side: the params that differ, final metrics, images/sec,
data hash; printed as a table and written as CSV."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.atomic import write_text_atomic
from tasks.tracking import mlflow_store
from tasks.tracking.scaling import rows_csv

METRICS = ("test_accuracy", "test_mae", "test_rmse", "test_r2", "test_loss", "val_accuracy", "val_mae",
           "images_per_sec_steady", "scaling_efficiency")
SKIPPED_PARAMS = {"data_hash", "git_commit", "scaling_key", "params_hash"}  # shown as their own columns or not useful


def last_runs(experiment: str, count: int) -> list[Any]:
    """The newest `count` training runs of the experiment (not scaling reports)."""
    return mlflow_store.newest_runs(experiment, "params.data_hash != ''", max_results=count)


def differing_params(runs: list[Any]) -> list[str]:
    """Param names whose values are not the same in every run."""
    names = sorted({name for run in runs for name in run.data.params} - SKIPPED_PARAMS)
    return [name for name in names if len({run.data.params.get(name) for run in runs}) > 1]


def comparison_rows(runs: list[Any]) -> list[dict[str, Any]]:
    """One row per run: id, start, status, data hash, differing params, final metrics."""
    import datetime
    varying = differing_params(runs)
    rows = []
    for run in runs:
        started = datetime.datetime.fromtimestamp(run.info.start_time / 1000, datetime.timezone.utc)
        row: dict[str, Any] = {"run_id": run.info.run_id, "start_utc": started.strftime("%Y-%m-%d %H:%M"),
                               "status": run.info.status, "data_hash": run.data.params.get("data_hash", "")[:12]}
        row |= {name: run.data.params.get(name, "") for name in varying}
        row |= {name: run.data.metrics.get(name, "") for name in METRICS}
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table; floats to 4 significant digits, run ids shortened."""
    def cell(key: str, value: Any) -> str:
        if key == "run_id":
            return str(value)[:12]
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    columns = list(rows[0])
    cells = [[cell(key, row[key]) for key in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = [columns, ["-" * width for width in widths], *cells]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in lines)


def compare(experiment: str, count: int, csv_path: Path) -> str:
    """The comparison table of the last `count` runs; the CSV is written to csv_path."""
    rows = comparison_rows(last_runs(experiment, count))
    if not rows:
        return f"no training runs in MLflow experiment {experiment!r} yet"
    write_text_atomic(csv_path, rows_csv(rows))
    return table(rows) + f"\n\n{len(rows)} runs; CSV: {csv_path}"
