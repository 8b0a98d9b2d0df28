"""The drift monitor's parts, real: the reference a training keeps (its test split's features and answers, in the
evaluation's order), a window of the model server's prediction log (files written by its own logger), and
Evidently's comparison in its own venv (drift in shifted items, none in the same distribution)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from servers.model.prediction_log import PredictionLog, Served
from tasks.monitoring.compare import compare, compared_columns, drift_figures
from tasks.monitoring.window import Window, served_rows
from tasks.params import MonitorParams
from tests.helpers import read_split

CLASS_NAMES = [f"digit {index}" for index in range(10)]


def test_the_reference_holds_the_test_splits_features_and_the_answers_in_the_evaluations_order(
        digits_data: Path, tmp_path: Path) -> None:
    import json

    from trainer.prepared_data import read_manifest
    from trainer.reference import REFERENCE, write_reference
    images, labels = read_split(digits_data, "test")
    outputs = np.full((len(labels), 10), 0.01, np.float32)
    outputs[np.arange(len(labels)), labels] = 0.91  # a model that answers each image's label
    assert write_reference(tmp_path, digits_data, read_manifest(digits_data), outputs, "classification",
                           CLASS_NAMES) == len(labels)
    rows = pd.DataFrame(json.loads((tmp_path / REFERENCE).read_text()))
    assert list(rows["answer"]) == [CLASS_NAMES[label] for label in labels]
    assert np.allclose(rows["score"], 0.91)
    assert np.allclose(rows["mean"], images[..., 0].mean(axis=(1, 2)), atol=1e-3)
    assert np.allclose(rows["spread"], images[..., 0].std(axis=(1, 2)), atol=1e-3)
    assert set(rows["height"]) == {8} and set(rows["channels"]) == {1}


def test_a_large_split_is_sampled_evenly() -> None:
    from trainer.reference import sample_indices
    chosen = sample_indices(5000)
    assert len(chosen) == 1000 and chosen[0] == 0 and chosen[-1] == 4999
    assert list(sample_indices(3)) == [0, 1, 2] and len(sample_indices(0)) == 0


def logged(folder: Path, times: list[datetime]) -> None:
    """Items served at those times, written by the model server's own prediction log."""
    log = PredictionLog(folder, 1.0, 10_000)
    pixels = np.full((8, 8, 1), 100, np.uint8)
    log.offer([Served(when.timestamp(), f"r{index}", "3", 0, pixels, "digit 1", 0.9, "", 1.0)
               for index, when in enumerate(times)], tensor=False)
    log.close()


def test_a_window_reads_the_hours_it_spans_and_only_its_items(tmp_path: Path) -> None:
    end = datetime(2026, 11, 29, 10, 20, tzinfo=timezone.utc)
    times = [end - timedelta(minutes=minutes) for minutes in (90, 50, 30, 1, 0)] + [end + timedelta(seconds=1)]
    logged(tmp_path, times)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["2026-11-29T08", "2026-11-29T09", "2026-11-29T10"]
    rows = served_rows(tmp_path, Window(end, 60))
    assert sorted(rows["request_id"]) == ["r1", "r2", "r3", "r4"]  # (end - 60 min, end]
    assert set(rows["mean"]) == {100.0} and set(rows["model_version"]) == {"3"}
    assert served_rows(tmp_path / "nothing", Window(end, 60)).empty


def test_two_monitor_runs_in_one_window_long_slot_share_it() -> None:
    at = datetime(2026, 11, 29, 10, 5, tzinfo=timezone.utc)
    later, next_hour = Window(at + timedelta(minutes=40), 60), Window(at + timedelta(hours=1), 60)
    assert Window(at, 60).slot == later.slot != next_hour.slot


def items(count: int, seed: int, brightness: float, answers: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"mean": rng.normal(brightness, 10, count), "spread": rng.normal(80, 5, count),
                         "score": rng.uniform(0.7, 1.0, count), "answer": rng.choice(answers, count)})


def test_evidently_finds_shifted_items_drifting_and_none_in_the_same_distribution(tmp_path: Path) -> None:
    settings = MonitorParams()
    reference = items(300, 0, 40, CLASS_NAMES)
    assert compared_columns(reference, reference) == (["mean", "spread", "score"], "answer")
    (tmp_path / "same").mkdir()
    same = compare(reference, items(300, 1, 40, CLASS_NAMES), settings, tmp_path / "same")
    assert not same.drifted(settings) and same.drifting == [] and same.answer_distance < 0.2
    (tmp_path / "shifted").mkdir()
    moved = items(300, 2, 200, CLASS_NAMES[:3])  # brighter, and answering three classes only
    shifted = compare(reference, moved, settings, tmp_path / "shifted")
    assert shifted.drifted(settings) and shifted.drifting == ["mean"] and shifted.answer_distance > 0.3
    assert "mean" in (tmp_path / "shifted" / "report.html").read_text()
    assert [path.name for path in drift_figures(reference, moved, tmp_path / "shifted")] == \
        ["features.png", "answers.png"]


def test_no_champion_is_nothing_to_monitor_and_a_champion_without_a_reference_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    from flows.monitor import outcome_line
    from tasks.monitoring.monitor import NothingToMonitor, monitor_window
    from tasks.params import load_params
    from tasks.tracking import mlflow_store
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = load_params({"serving.log_dir": str(tmp_path / "predictions"), "monitor.min_items": 2})
    window = Window(datetime.now(timezone.utc) + timedelta(minutes=2), 5)
    result = monitor_window(params, window)
    assert outcome_line(result, params.monitor) == \
        "no version of ringflow holds the alias champion: nothing served to monitor"
    run_id = mlflow_store.start_run("elsewhere", {}, {})  # a version registered by other means: no reference
    client = mlflow.MlflowClient(uri)
    client.create_registered_model("ringflow")
    version = client.create_model_version("ringflow", mlflow_store.artifact_location(run_id), run_id).version
    client.set_registered_model_alias("ringflow", "champion", version)
    logged(tmp_path / "predictions", [datetime.now(timezone.utc)] * 3)  # version "3": not the champion's
    assert monitor_window(params, window).items == 0
    log = PredictionLog(tmp_path / "predictions", 1.0, 10_000)
    log.offer([Served(datetime.now(timezone.utc).timestamp(), f"r{index}", str(version), 0,
                      np.zeros((8, 8, 1), np.uint8), "0", 0.5, "", 1.0) for index in range(3)], tensor=False)
    log.close()
    with pytest.raises(NothingToMonitor, match=f"ringflow v{version} has no reference to compare with: its run "
                                               f"{run_id} kept no evaluation/reference.json"):
        monitor_window(params, window)


def test_a_bad_monitor_setting_is_one_line_before_anything_starts() -> None:
    from tests.helpers import PYTHON, ROOT, quiet_env, run
    done = run([PYTHON, "-m", "flows.monitor", "--set", "monitor.retrain=retrain"], ROOT, quiet_env(), timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: bad parameter monitor.retrain: 'retrain' is no deployment's full name: FLOW/DEPLOYMENT, as "
        "training-pipeline/retrain"], done.stderr
    assert "Flow run" not in done.stdout
