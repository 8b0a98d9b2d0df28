"""Rank 0's metric lines reach the run's MLflow run through the head node, and stay off the console."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.output.metrics_relay import MetricRelay
from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE, read_spool
from trainer.protocol import metrics_line


def test_metric_lines_are_logged_per_epoch_and_other_lines_pass(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # the store ringflow's side logs to
    client = MlflowClient(tracking_uri=uri)  # not mlflow's global one, which another test may have set
    run_id = client.create_run(client.create_experiment("relay")).info.run_id
    shown: list[str] = []
    job = JobSpec(data_dir=tmp_path, out_dir=tmp_path / "model", checkpoint_dir=tmp_path / "checkpoints",
                  checkpoint_owner="t", augment=False, data_fingerprint="f", metrics_retry_seconds=60)
    handle = MetricRelay(run_id, job, shown.append)
    for epoch, loss in enumerate((0.9, 0.4)):
        handle(f"[0]<stdout>:epoch {epoch + 1}: loss={loss}")
        handle("[0]<stdout>:" + metrics_line(epoch, {"loss": loss, "accuracy": 1 - loss}))
    handle.close()
    assert shown == ["[0]<stdout>:epoch 1: loss=0.9", "[0]<stdout>:epoch 2: loss=0.4"]
    history = client.get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.9), (1, 0.4)]
    assert len(read_spool(tmp_path / "checkpoints" / SPOOL_FILE)) == 2  # a rank on another host spools nothing here
