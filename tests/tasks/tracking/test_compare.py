"""compare: the last runs side by side, against a real MLflow store in a temporary folder."""
from __future__ import annotations

import csv
from pathlib import Path

from tasks.tracking import mlflow_store
from tasks.tracking.compare import compare
from tests.tasks.tracking.conftest import EXPERIMENT


def test_compare_lists_differing_params_and_metrics(store_dir: Path) -> None:
    for rate, accuracy in ((0.001, 0.91), (0.002, 0.93), (0.004, 0.92)):
        run_id = mlflow_store.start_run(EXPERIMENT, {"learning_rate": rate, "epochs": 5, "data_hash": "abc.dir"}, {})
        mlflow_store.log_metrics(run_id, {"test_accuracy": accuracy, "images_per_sec_steady": 1000.0})
    out = store_dir / "compare.csv"
    shown = compare(EXPERIMENT, 2, out)
    rows = list(csv.DictReader(out.open()))
    assert [row["learning_rate"] for row in rows] == ["0.004", "0.002"]  # the newest two, newest first
    assert [row["test_accuracy"] for row in rows] == ["0.92", "0.93"]
    assert "epochs" not in rows[0] and rows[0]["data_hash"] == "abc.dir"
    assert "learning_rate" in shown.splitlines()[0] and "2 runs" in shown
