"""Backend `horovod` in Horovod's elastic mode: one rank trains inside hvd.elastic.run, says the ring it starts
with, commits each epoch with its metrics (the history it saves comes from the commits); a new ring size rescales
the learning rate and its warmup."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.backends.one_process import Trained
from tests.trainer.configs import trainer_config
from trainer import session
from trainer.backends.horovod_elastic import RanksInLogs, follow_size
from trainer.checkpoint_files import saved_epochs
from trainer.model_io import load_model, read_train_summary
from trainer.models import build_model
from trainer.protocol import elastic_starts, parse_epoch_line, weights_digests


def test_one_rank_trains_elastically_commits_every_epoch_and_saves_the_model(
        horovod_trainings: dict[str, Trained]) -> None:
    trained = horovod_trainings["elastic"]
    job, lines = trained.config.job, trained.lines
    assert elastic_starts("\n".join(lines)) == [(1, 1)]  # 1 rank, from the first epoch
    shown = [parsed for line in lines if (parsed := parse_epoch_line(line))]
    assert [(epoch, metrics["world_size"]) for epoch, metrics in shown] == [(1, 1.0), (2, 1.0)]
    assert saved_epochs(job.checkpoint_dir) == 2
    ((who, digest),) = weights_digests("\n".join(lines))
    assert who == "rank=0" and digest == session.weights_digest(load_model(job.out_dir))
    history = read_train_summary(job.out_dir)["history"]
    assert history["world_size"] == [1.0, 1.0]
    assert history["loss"] == pytest.approx([metrics["loss"] for _, metrics in shown], rel=1e-3)


def test_a_new_ring_size_rescales_the_rate_and_warmup_and_retraces_the_step(digits_data: Path,
                                                                              tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, learning_rate=0.001, warmup_epochs=1)
    two, four = (session.plan(config, processes=ranks, gpus_per_host=0) for ranks in (2, 4))
    model = build_model("small_cnn", two.input_shape, 10)
    model.compile(optimizer=session.make_optimizer(two), loss=session.loss_function(config))
    model.make_train_function()
    follow_size(model, four)
    schedule = model.optimizer.learning_rate
    assert (schedule.initial, schedule.target, schedule.warmup_steps) == (0.001, 0.004, four.steps_per_epoch)
    assert four.steps_per_epoch != two.steps_per_epoch and model.train_function is None


def test_the_epoch_metrics_say_how_many_ranks_trained_it() -> None:
    logs = {"loss": 0.5}
    RanksInLogs(3).on_epoch_end(0, logs)
    assert logs == {"loss": 0.5, "world_size": 3.0}
    RanksInLogs(3).on_epoch_end(0, None)  # no logs: nothing to add to, no error
