"""Backend `horovod`: one rank fits from the run's checkpoint on, reports each averaged epoch, checkpoints it and
saves the model it trained; the callbacks put the averaging before the reporting and only rank 0 reports."""
from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tests.trainer.backends.one_process import Trained
from tests.trainer.configs import OWNER, trainer_config
from trainer import session
from trainer.backends.horovod_fit import every_rank
from trainer.backends.horovod_keras import hvd
from trainer.callbacks import CheckpointEveryEpoch, EpochReport, MetricAverage, Throughput
from trainer.checkpoint_files import saved_epochs
from trainer.checkpoints import Checkpoints
from trainer.loop import fit_callbacks
from trainer.model_io import load_model, read_train_summary
from trainer.models import build_model
from trainer.prepared_data import read_manifest
from trainer.protocol import parse_epoch_line, parse_metrics_line, weights_digests

EPOCH_METRICS = {"loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec", "epoch_time", "learning_rate"}


def test_one_rank_fits_reports_checkpoints_and_saves_the_model_it_trained(
        horovod_trainings: dict[str, Trained]) -> None:
    trained = horovod_trainings["fit"]
    job, lines = trained.config.job, trained.lines
    shown = [parsed for line in lines if (parsed := parse_epoch_line(line))]
    assert [epoch for epoch, _ in shown] == [2] and set(shown[0][1]) == EPOCH_METRICS
    relayed = [parsed for line in lines if (parsed := parse_metrics_line(line))]  # no MLflow run: as lines
    assert [(epoch, set(metrics)) for epoch, metrics in relayed] == [(1, EPOCH_METRICS)]
    assert saved_epochs(job.checkpoint_dir) == 2
    ((who, digest),) = weights_digests("\n".join(lines))
    assert who == "rank=0" and digest == session.weights_digest(load_model(job.out_dir))
    records = read_manifest(job.data_dir)["splits"]["train"]["count"]
    summary = read_train_summary(job.out_dir)
    assert (summary["backend"], summary["world_size"], summary["global_batch_size"]) == ("horovod", 1, 128)
    assert summary["steps_per_epoch"] == records // 128 and summary["records_per_rank"] == [records]
    assert summary["resumed_from_epoch"] == 1 and len(summary["history"]["val_loss"]) == 1


def test_only_rank_0_reports_and_checkpoints_after_the_averaging_and_elastic_mode_leaves_out_the_broadcast(
        digits_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    config = trainer_config(digits_data, tmp_path, tensorboard=True)
    run = session.plan(config, processes=2, gpus_per_host=0)
    checkpoints = Checkpoints(tmp_path, build_model("small_cnn", (8, 8, 1), 10), tf.keras.optimizers.legacy.Adam(),
                              1, OWNER)
    kinds = lambda made: [type(callback) for callback in made]  # noqa: E731
    broadcast = hvd.callbacks.BroadcastGlobalVariablesCallback
    assert kinds(fit_callbacks(config, run, False, False, checkpoints, every_rank(100), [])) == [
        broadcast, MetricAverage]
    assert kinds(fit_callbacks(config, run, True, True, checkpoints, every_rank(100), [])) == [
        broadcast, MetricAverage, Throughput, EpochReport, tf.keras.callbacks.TensorBoard, CheckpointEveryEpoch]
    assert kinds(every_rank(100, broadcast=False)) == [MetricAverage]
