"""Backend `horovod-tape`: one rank trains with hvd.DistributedGradientTape (gradients compressed to fp16 for the
allreduce), reports training and validation metrics of each epoch, checkpoints it and saves the model it trained."""
from __future__ import annotations

import pytest

from tests.trainer.backends.one_process import Trained
from trainer import session
from trainer.checkpoint_files import saved_epochs
from trainer.model_io import load_model, read_train_summary
from trainer.protocol import parse_epoch_line, parse_metrics_line, resumed_epochs, weights_digests

EPOCH_METRICS = {"loss", "accuracy", "val_loss", "val_accuracy", "images_per_sec", "epoch_time", "learning_rate"}


def test_one_rank_trains_an_epoch_with_the_tape_reports_checkpoints_and_saves_it(
        horovod_trainings: dict[str, Trained]) -> None:
    trained = horovod_trainings["tape"]
    job, lines = trained.config.job, trained.lines
    assert resumed_epochs("\n".join(lines)) == []  # a new run
    ((epoch, metrics),) = [parsed for line in lines if (parsed := parse_epoch_line(line))]
    assert epoch == 1 and set(metrics) == EPOCH_METRICS
    assert 0 <= metrics["accuracy"] <= 1 and 0 <= metrics["val_accuracy"] <= 1 and metrics["val_loss"] > 0
    assert [epoch for epoch, _ in filter(None, map(parse_metrics_line, lines))] == [0]
    assert saved_epochs(job.checkpoint_dir) == 1
    ((who, digest),) = weights_digests("\n".join(lines))
    assert who == "rank=0" and digest == session.weights_digest(load_model(job.out_dir))
    summary = read_train_summary(job.out_dir)
    assert summary["backend"] == "horovod-tape" and set(summary["history"]) == EPOCH_METRICS
    assert summary["history"]["loss"] == pytest.approx([metrics["loss"]], rel=1e-3)  # the line shows 4 digits
