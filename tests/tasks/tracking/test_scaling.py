"""The scaling report: steady images/sec per process count, speed-up and efficiency against the smallest count,
as a table, a CSV and a chart in a `scaling` MLflow run."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tasks.tracking import mlflow_store
from tasks.tracking.scaling import chart, log_report, rows_csv, scaling_rows


@pytest.fixture
def experiment(shared_store: str, tmp_path: Path) -> str:
    name = f"scaling-{tmp_path.name}"
    mlflow_store.client().create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    return name


def run_at(experiment: str, images_per_sec: float) -> str:
    run_id = mlflow_store.start_run(experiment, {}, {})
    mlflow_store.log_metrics(run_id, {"images_per_sec_steady": images_per_sec})
    mlflow_store.end_run(run_id, ok=True)
    return run_id


def test_speedup_and_efficiency_are_against_the_smallest_count(experiment: str) -> None:
    runs = [(4, run_at(experiment, 300.0)), (1, run_at(experiment, 100.0)), (2, run_at(experiment, 180.0))]
    rows = scaling_rows(runs)
    assert [(row["np"], row["speedup"], row["scaling_efficiency"]) for row in rows] == \
        [(1, 1.0, 1.0), (2, 1.8, 0.9), (4, 3.0, 0.75)]
    assert list(csv.DictReader(io.StringIO(rows_csv(rows))))[1] == \
        {"np": "2", "images_per_sec": "180.0", "speedup": "1.8", "scaling_efficiency": "0.9", "run_id": runs[2][1]}


def test_the_report_is_a_scaling_run_with_the_table_the_chart_and_each_efficiency(experiment: str,
                                                                                   tmp_path: Path) -> None:
    rows = [{"np": 1, "images_per_sec": 10.0, "speedup": 1.0, "scaling_efficiency": 1.0, "run_id": "a"},
            {"np": 2, "images_per_sec": 16.0, "speedup": 1.6, "scaling_efficiency": 0.8, "run_id": "b"}]
    run = mlflow_store.client().get_run(log_report(experiment, rows, tmp_path / "work"))
    assert run.data.tags["ringflow.kind"] == "scaling" and run.info.status == "FINISHED"
    assert run.data.metrics == {"scaling_efficiency_np1": 1.0, "scaling_efficiency_np2": 0.8}
    assert {item.path for item in mlflow_store.client().list_artifacts(run.info.run_id)} == \
        {"scaling.csv", "scaling.png"}
    assert chart(rows, tmp_path / "again.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
