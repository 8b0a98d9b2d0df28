"""Scaling report: images/sec and efficiency of the same config at several process counts (as in the scaling
table of NVIDIA DLI's multi-GPU notebooks)."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from tasks.outputs.charts import pyplot, save
from tasks.tracking import mlflow_store


def scaling_rows(runs: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """For (np, run id) pairs: steady images/sec, speed-up and efficiency against the smallest np."""
    client = mlflow_store.client()
    rates = {np: client.get_run(run_id).data.metrics["images_per_sec_steady"] for np, run_id in runs}
    base_np = min(rates)
    rows = []
    for np, run_id in sorted(runs):
        speedup = rates[np] / rates[base_np]
        rows.append({"np": np, "images_per_sec": round(rates[np], 1), "speedup": round(speedup, 3),
                     "scaling_efficiency": round(speedup * base_np / np, 3), "run_id": run_id})
    return rows


def rows_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def chart(rows: list[dict[str, Any]], path: Path) -> Path:
    """A PNG: images/sec (bars) and scaling efficiency (line) by process count."""
    figure, rate_axis = pyplot().subplots(figsize=(6, 4))
    counts = [str(row["np"]) for row in rows]
    rate_axis.bar(counts, [row["images_per_sec"] for row in rows], color="#4c72b0")
    rate_axis.set_xlabel("processes (np)")
    rate_axis.set_ylabel("images/sec")
    efficiency_axis = rate_axis.twinx()
    efficiency_axis.plot(counts, [row["scaling_efficiency"] for row in rows], color="#dd8452", marker="o")
    efficiency_axis.set_ylim(0, 1.1)
    efficiency_axis.set_ylabel("scaling efficiency")
    figure.suptitle("ringflow scaling")
    return save(figure, path)


def log_report(experiment: str, rows: list[dict[str, Any]], work_dir: Path) -> str:
    """A `scaling` MLflow run holding the table (CSV) and the chart; returns its id."""
    counts = [row["np"] for row in rows]
    run_id = mlflow_store.start_run(experiment, {"scaling_np": counts}, {"ringflow.kind": "scaling"},
                                    name="scaling-np" + ",".join(map(str, counts)))
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "scaling.csv").write_text(rows_csv(rows))
    for file in (work_dir / "scaling.csv", chart(rows, work_dir / "scaling.png")):
        mlflow_store.log_artifacts(run_id, file)
    mlflow_store.log_metrics(run_id, {f"scaling_efficiency_np{row['np']}": row["scaling_efficiency"] for row in rows})
    mlflow_store.end_run(run_id, ok=True)
    return run_id
