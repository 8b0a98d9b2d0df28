"""When a job ends, the epochs of its spool that the run lacks are logged, once; a failed job's error goes on."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.tracking import mlflow_store
from tasks.tracking.metric_catchup import catching_up_metrics, log_spooled_metrics
from trainer.metric_log import SPOOL_FILE, append_to_spool


@pytest.fixture
def run_id(shared_store: str, tmp_path: Path) -> str:
    name = f"catchup-{tmp_path.name}"
    mlflow_store.client().create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    return mlflow_store.start_run(name, {}, {})


def history(run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in mlflow_store.client().get_metric_history(run_id, key))


def test_only_what_the_run_lacks_is_logged_and_only_once(run_id: str, tmp_path: Path) -> None:
    mlflow_store.log_metrics(run_id, {"loss": 0.9, "accuracy": 0.1}, step=0)  # what the server took
    for epoch, loss in enumerate((0.9, 0.5, 0.25)):
        append_to_spool(tmp_path / SPOOL_FILE, epoch, {"loss": loss, "accuracy": 1 - loss}, 1000 + epoch)
    assert log_spooled_metrics(run_id, tmp_path) == 2
    assert log_spooled_metrics(run_id, tmp_path) == 0
    assert history(run_id, "loss") == [(0, 0.9), (1, 0.5), (2, 0.25)]
    stamps = {m.step: m.timestamp for m in mlflow_store.client().get_metric_history(run_id, "loss")}
    assert (stamps[1], stamps[2]) == (1001, 1002)  # when rank 0 reported them, not when they were caught up
    assert [step for step, _ in history(run_id, "accuracy")] == [0, 1, 2]


def test_a_failed_job_is_caught_up_and_its_error_goes_on(run_id: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="rank 1 died"), catching_up_metrics(run_id, tmp_path):
        append_to_spool(tmp_path / SPOOL_FILE, 0, {"loss": 0.5}, 1000)
        raise RuntimeError("rank 1 died")
    assert history(run_id, "loss") == [(0, 0.5)]
    assert log_spooled_metrics(run_id, tmp_path / "no-spool-here") == 0
