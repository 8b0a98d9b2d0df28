"""Where rank 0's epoch metrics go: with MLFLOW_RUN_ID, straight into that run of the store MLFLOW_TRACKING_URI
names, epoch by epoch; without it, as metric lines the launcher reads back and logs."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE, read_spool
from trainer.metrics_sink import metric_sink, print_epoch_metrics
from trainer.protocol import parse_metrics_line


def job(tmp_path: Path) -> JobSpec:
    return JobSpec(data_dir=tmp_path, out_dir=tmp_path / "model", checkpoint_dir=tmp_path / "checkpoints",
                   checkpoint_owner="t", augment=False, data_fingerprint="f", metrics_retry_seconds=60)


def test_without_a_run_id_the_metrics_leave_as_lines_the_launcher_reads_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    sink = metric_sink(job(tmp_path))
    assert sink is print_epoch_metrics
    sink(0, {"loss": 0.5, "accuracy": 0.75})
    sink(1, {"loss": 0.25})
    lines = capsys.readouterr().out.splitlines()
    assert [parse_metrics_line(line) for line in lines] == [(0, {"loss": 0.5, "accuracy": 0.75}), (1, {"loss": 0.25})]


def test_with_a_run_id_each_epoch_goes_into_that_mlflow_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import mlflow.tracking._tracking_service.utils as tracking_utils
    from mlflow.tracking import MlflowClient
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # what a training process is given
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)  # as in a training process: no URI set in code
    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(client.create_experiment("epochs")).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.setenv(name, "")  # the sink sets its own; the test's environment gets its own back
    sink = metric_sink(job(tmp_path))
    sink(0, {"loss": 0.5, "accuracy": 0.75})
    sink(1, {"loss": 0.25, "accuracy": 0.875})
    assert sink.close() == 0  # type: ignore[attr-defined]
    assert len(read_spool(tmp_path / "checkpoints" / SPOOL_FILE)) == 2  # spooled first, beside the checkpoints
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")] == [(0, 0.5), (1, 0.25)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "accuracy")] == [(0, 0.75), (1, 0.875)]
    assert capsys.readouterr().out == ""  # not also as lines: the launcher would log them twice
