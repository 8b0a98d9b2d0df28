"""The drift report, run by Evidently's venv (evidently_env.py):

    python -m tasks.monitoring.drift_report FOLDER

FOLDER holds reference.parquet, current.parquet and request.json (the numerical columns, the answer column or null,
the drift share and the answers' threshold); this writes report.html (Evidently's) and summary.json (each column's
test, value, threshold and whether it drifted; the share of drifting columns). Imports nothing of ringflow: it runs
with Evidently's pandas, not the stack's."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def column_drifts(metrics: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each column's test from the snapshot's metrics: a p-value drifts below its threshold, a distance at or above."""
    found = {}
    for metric in metrics:
        config = metric["config"]
        if config["type"].endswith(":ValueDrift"):
            method, value, threshold = config["method"], float(metric["value"]), float(config["threshold"])
            drifted = value < threshold if "p_value" in method else value >= threshold
            found[config["column"]] = {"method": method, "value": value, "threshold": threshold, "drifted": drifted}
    return found


def report(folder: Path) -> dict[str, Any]:
    import pandas as pd
    from evidently import DataDefinition, Dataset, Report
    from evidently.metrics import ValueDrift
    from evidently.presets import DataDriftPreset
    request = json.loads((folder / "request.json").read_text())
    numerical, answer = request["numerical"], request["answer"]
    definition = DataDefinition(numerical_columns=numerical, categorical_columns=[answer] if answer else [])
    metrics: list[Any] = [DataDriftPreset(columns=numerical, drift_share=request["drift_share"])]
    if answer:
        metrics.append(ValueDrift(column=answer, method="jensenshannon", threshold=request["answer_threshold"]))
    frames = [Dataset.from_pandas(pd.read_parquet(folder / f"{name}.parquet"), data_definition=definition)
              for name in ("current", "reference")]
    snapshot = Report(metrics).run(*frames)
    snapshot.save_html(str(folder / "report.html"))
    columns = column_drifts(snapshot.dict()["metrics"])
    drifting = [name for name in numerical if columns[name]["drifted"]]
    return {"columns": columns, "drifting": drifting, "share": len(drifting) / len(numerical),
            "answer_distance": columns[answer]["value"] if answer else None}


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    summary = report(folder)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
