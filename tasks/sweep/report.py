"""The sweep's own MLflow run, the parent of its trials: the search it ran, then the best trial's values and
metric, a table of every trial (CSV) and two charts (PNG): the metric per trial in order (Optuna's optimization
history) and the parameters against the metric (parallel coordinates)."""
from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

from tasks.params import Params
from tasks.sweep.space import SweepParams
from tasks.sweep.trial import TrialOutcome
from tasks.tracking import mlflow_store, run_log
from tasks.tracking.run_labels import RunSource, source_tags
from tasks.tracking.scaling import rows_csv
from tasks.versioning.dvc import DataVersion

SWEEP_KIND = "sweep"  # the parent run's ringflow.kind
BEST_RUN_TAG = "ringflow.sweep.best_run"


def open_sweep_run(base: Params, sweep: SweepParams, version: DataVersion, source: RunSource) -> str:
    """The parent run: what the sweep searches, how, on which data and code."""
    settings = sweep.model_dump(mode="json")
    params = {f"sweep.{key}": json.dumps(value) if key == "space" else value for key, value in settings.items()}
    tags = {**source_tags(source, version.git_commit), "ringflow.kind": SWEEP_KIND,
            "ringflow.data_hash": version.data_hash}
    run_id = mlflow_store.start_run(base.tracking.experiment, params, tags)
    with mlflow_store.failing_marks_run(run_id):
        mlflow_store.client().update_run(run_id, name=f"sweep-{sweep.method}-{sweep.trials}-trials-{run_id[:6]}")
        run_log.log_prepared_dataset(run_id, base, version.data_hash)
    return run_id


def best_trial(outcomes: list[TrialOutcome], sweep: SweepParams) -> TrialOutcome | None:
    """The finished trial with the best metric (None when none finished)."""
    finished = [outcome for outcome in outcomes if outcome.state == "finished" and outcome.value is not None]
    if not finished:
        return None
    pick = max if sweep.direction == "maximize" else min
    return pick(finished, key=lambda outcome: outcome.value)  # type: ignore[arg-type, return-value]


def charts(study: Any, folder: Path, metric: str) -> list[Path]:
    """Optuna's optimization history and parallel-coordinates plots of the metric as PNG files."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots
    written = []
    for name, plot in (("optimization_history.png", optuna_plots.plot_optimization_history),
                       ("parallel_coordinates.png", optuna_plots.plot_parallel_coordinate)):
        with warnings.catch_warnings():  # Optuna calls its matplotlib plots experimental; one trial makes flat axes
            warnings.simplefilter("ignore")
            plot(study, target_name=metric)
        figure = plt.gcf()
        figure.set_size_inches(9, 5)
        figure.savefig(folder / name, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(folder / name)
    return written


def close_sweep_run(run_id: str, sweep: SweepParams, study: Any, outcomes: list[TrialOutcome]) -> TrialOutcome | None:
    """The best trial's values and metric, the trials' table and the charts into the parent run; FINISHED."""
    best = best_trial(outcomes, sweep)
    rows = [outcome.row(sweep.metric) for outcome in sorted(outcomes, key=lambda outcome: outcome.number)]
    with tempfile.TemporaryDirectory(prefix="sweep-report-") as folder:
        (Path(folder) / "trials.csv").write_text(rows_csv(rows))
        files = [Path(folder) / "trials.csv", *(charts(study, Path(folder), sweep.metric) if best else [])]
        for file in files:
            mlflow_store.log_artifacts(run_id, file)
    counts = {state: sum(outcome.state == state for outcome in outcomes) for state in ("finished", "pruned", "failed")}
    mlflow_store.log_metrics(run_id, {f"trials_{state}": count for state, count in counts.items()})
    if best is not None and best.value is not None:
        mlflow_store.log_params(run_id, {f"best.{name}": value for name, value in best.values.items()})
        mlflow_store.log_metrics(run_id, {f"best_{sweep.metric}": best.value})
        mlflow_store.set_tags(run_id, {BEST_RUN_TAG: best.run_id})
    mlflow_store.end_run(run_id, ok=best is not None)
    return best
