"""One monitor run over a window: the version serving as champion, its reference (kept by its training run), the
window's served items of that version, the comparison, and its record in MLflow: a run of the experiment
`<tracking.experiment>-monitor` holding Evidently's report (drift/report.html), the figures and the figures' numbers,
and on the registered version, tags naming that run and what it found (ringflow.drift.*)."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.monitoring.compare import Comparison, compare, drift_figures
from tasks.monitoring.window import Window, served_rows
from tasks.params import Params
from tasks.paths import prediction_log_dir
from tasks.tracking import mlflow_store
from tasks.tracking.model_registry import current_champion
from tasks.tracking.run_log import REFERENCE_ARTIFACT


class NothingToMonitor(RuntimeError):
    """A champion whose training kept no reference."""
    bad_input = True


@dataclass(frozen=True)
class MonitorResult:
    """A window's outcome: the version ("": no champion), its items there, the comparison (None: too few items)
    and its MLflow run."""
    model: str
    version: str
    window: Window
    items: int
    refused: int  # items of the version that it could not use (not compared)
    comparison: Comparison | None = None
    run_id: str | None = None


def reference_of(version: Any) -> Any:
    """The reference the version's training run kept (a pandas DataFrame)."""
    import pandas as pd
    from mlflow.artifacts import download_artifacts
    from mlflow.exceptions import MlflowException
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = download_artifacts(run_id=version.run_id, artifact_path=REFERENCE_ARTIFACT, dst_path=folder,
                                      tracking_uri=mlflow_store.tracking_uri())
            return pd.DataFrame(json.loads(Path(path).read_text()))
    except (MlflowException, OSError) as error:
        raise NothingToMonitor(f"{version.name} v{version.version} has no reference to compare with: its run "
                               f"{version.run_id} kept no {REFERENCE_ARTIFACT} (trained before ringflow kept one: "
                               f"train again) ({type(error).__name__})") from error


def monitor_window(params: Params, window: Window) -> MonitorResult:
    """Compare the window's items of the champion's version with its reference, when there are monitor.min_items of
    them; record the comparison in MLflow."""
    model = params.registry.model_name
    version = current_champion(model)
    if version is None:
        return MonitorResult(model, "", window, 0, 0)
    rows = served_rows(prediction_log_dir(params.serving.log_dir), window)
    mine = rows[rows["model_version"] == str(version.version)]
    usable = mine[mine["error"].fillna("") == ""]
    result = MonitorResult(model, str(version.version), window, len(usable), len(mine) - len(usable))
    if len(usable) < params.monitor.min_items:
        return result
    reference = reference_of(version)
    with tempfile.TemporaryDirectory(prefix="ringflow-drift-") as folder:
        comparison = compare(reference, usable.reset_index(drop=True), params.monitor, Path(folder))
        drift_figures(reference, usable, Path(folder))
        run_id = record(params, result, comparison, Path(folder))
    return MonitorResult(model, result.version, window, result.items, result.refused, comparison, run_id)


def record(params: Params, result: MonitorResult, comparison: Comparison, folder: Path) -> str:
    """The comparison as an MLflow run (report, figures, numbers) and as tags of the registered version."""
    drifted = comparison.drifted(params.monitor)
    tags = {"ringflow.model_name": result.model, "ringflow.model_version": result.version,
            "ringflow.window_start": result.window.start.isoformat(),
            "ringflow.window_end": result.window.end.isoformat(), "ringflow.drift": str(drifted).lower()}
    run_id = mlflow_store.start_run(f"{params.tracking.experiment}-monitor", params.monitor.model_dump(mode="json"),
                                    tags, name=f"{result.model} v{result.version} {result.window}")
    metrics = {"items": result.items, "refused": result.refused, "drift_share": comparison.share,
               **{f"drift_{name}": column["value"] for name, column in comparison.columns.items()}}
    if comparison.answer_distance is not None:
        metrics["answer_distance"] = comparison.answer_distance
    mlflow_store.log_metrics(run_id, metrics)
    for name in ("report.html", "summary.json", "features.png", "answers.png"):
        if (folder / name).is_file():
            mlflow_store.log_artifacts(run_id, folder / name, "drift")
    mlflow_store.end_run(run_id, True)
    client = mlflow_store.client()
    for key, value in {"run_id": run_id, "detected": str(drifted).lower(), "share": f"{comparison.share:.3f}",
                       "window_end": result.window.end.isoformat()}.items():
        client.set_model_version_tag(result.model, result.version, f"ringflow.drift.{key}", value)
    return run_id
