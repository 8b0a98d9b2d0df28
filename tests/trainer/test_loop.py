"""The one training loop, with a backend of one plain Keras process: the lead reports each epoch before its
checkpoint and writes the model and its summary; a second job resumes from the checkpoint and says so; a job whose
checkpoints hold all its epochs saves the model they hold, one that asks fewer is an error; a process that is not
the lead writes the job's places never (a scratch copy when every process must save, nothing otherwise)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

from tests.trainer.configs import trainer_config
from trainer import loop, session
from trainer.checkpoint_files import saved_epochs
from trainer.checkpoints import Checkpoints
from trainer.config import TrainerConfig
from trainer.model_io import load_model, read_train_summary
from trainer.protocol import parse_epoch_line, resumed_epochs, weights_digests


class Alone(loop.Backend):
    """Keras fit in this process alone; `lead` and `every_process_saves` as a test sets them."""

    def __init__(self, lead: bool = True, every_process_saves: bool = False) -> None:
        self._lead, self.every_process_saves = lead, every_process_saves
        self.checkpointed: list[int] = []

    def start(self, config: TrainerConfig) -> None:
        tf.keras.utils.set_random_seed(config.train.seed)

    def lead(self) -> bool:
        return self._lead

    def who(self) -> str:
        return "alone"

    def plan(self, config: TrainerConfig) -> session.Plan:
        return session.plan(config, processes=1, gpus_per_host=0)

    def build(self, config: TrainerConfig, run: session.Plan) -> tuple[tf.keras.Model, Any]:
        model = session.job_model(config, run)
        model.compile(optimizer=session.make_optimizer(run), loss=session.loss_function(config), metrics=["accuracy"])
        return model, model.optimizer

    def epochs(self, config: TrainerConfig, run: session.Plan, model: tf.keras.Model, checkpoints: Checkpoints,
               started: int) -> loop.History:
        inputs = {"x": session.training_dataset(config, run, 0, 1, config.train.batch_size),
                  "steps_per_epoch": run.steps_per_epoch}
        seen = tf.keras.callbacks.LambdaCallback(  # after the checkpoint: what the index says then
            on_epoch_end=lambda epoch, logs: self.checkpointed.append(saved_epochs(config.job.checkpoint_dir)))
        return loop.fit_epochs(config, run, self, model, checkpoints, started, inputs, after=[seen])


def epochs_shown(said: str) -> list[int]:
    """The epochs of the epoch lines printed (numbered from 1)."""
    return [found[0] for line in said.splitlines() if (found := parse_epoch_line(line))]


def test_the_lead_reports_each_epoch_before_its_checkpoint_then_a_second_job_resumes(
        digits_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = Alone()
    loop.train(trainer_config(digits_data, tmp_path, epochs=2), first)
    said = capsys.readouterr().out
    assert epochs_shown(said) == [1, 2]
    assert first.checkpointed == [1, 2] and resumed_epochs(said) == []
    assert [who for who, _ in weights_digests(said)] == ["alone"]
    summary = read_train_summary(tmp_path / "model")
    assert summary["resumed_from_epoch"] == 0 and len(summary["history"]["loss"]) == 2

    loop.train(trainer_config(digits_data, tmp_path, epochs=3), Alone())
    said = capsys.readouterr().out
    assert resumed_epochs(said) == [2] and epochs_shown(said) == [3]
    assert read_train_summary(tmp_path / "model")["resumed_from_epoch"] == 2 and saved_epochs(
        tmp_path / "checkpoints") == 3
    with pytest.raises(ValueError, match="^nothing to train: the checkpoints already hold 3 epochs and "
                                         "train.epochs is 2$"):
        loop.train(trainer_config(digits_data, tmp_path, epochs=2), Alone())


def test_a_job_whose_checkpoints_hold_all_its_epochs_saves_the_model_they_hold(
        digits_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the retry of a job that ended after its last checkpoint and before it saved the model: no epoch trained,
    the model restored from the checkpoint saved with its summary, the digest line said."""
    loop.train(trainer_config(digits_data, tmp_path, epochs=2), Alone())
    (digest,) = [digest for _, digest in weights_digests(capsys.readouterr().out)]
    shutil.rmtree(tmp_path / "model")  # lost with the job that did not save it
    again = Alone()
    loop.train(trainer_config(digits_data, tmp_path, epochs=2), again)
    said = capsys.readouterr().out
    assert resumed_epochs(said) == [2] and epochs_shown(said) == [] and again.checkpointed == []
    assert "the checkpoints hold all 2 epochs" in said
    assert weights_digests(said) == [("alone", digest)]
    summary = read_train_summary(tmp_path / "model")
    assert summary["resumed_from_epoch"] == 2 and summary["history"] == {}
    assert session.weights_digest(load_model(tmp_path / "model")) == digest


@pytest.mark.parametrize("every_process_saves", [True, False])
def test_a_process_that_does_not_lead_writes_none_of_the_jobs_places(digits_data: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     every_process_saves: bool) -> None:
    worker = Alone(lead=False, every_process_saves=every_process_saves)
    loop.train(trainer_config(digits_data, tmp_path), worker)
    said = capsys.readouterr().out
    assert epochs_shown(said) == []  # the lead reports
    assert [who for who, _ in weights_digests(said)] == ["alone"]  # every process says its digest
    assert not (tmp_path / "model").exists() and not (tmp_path / "checkpoints").exists()
    assert worker.checkpointed == [0]  # the job's checkpoint index untouched at the epoch's end
