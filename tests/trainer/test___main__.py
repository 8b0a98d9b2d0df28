"""`python -m trainer --config FILE`: the only argument is the job's configuration file, whose job it trains with
the heartbeat started and each output line leaving in one write."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import trainer.__main__ as entry
from tests.helpers import PYTHON, ROOT, quiet_env, run
from tests.trainer.configs import trainer_config, write_job_config
from trainer.config import TrainerConfig, read_config
from trainer.protocol import HEARTBEAT_END_LINE, HEARTBEAT_ENV


def test_the_trainer_takes_only_the_config_file() -> None:
    done = run([PYTHON, "-m", "trainer", "--epochs", "3"], ROOT, quiet_env(), timeout=120)
    assert done.returncode == 2 and "the following arguments are required: --config" in done.stderr


def test_the_job_of_the_config_file_is_trained_with_line_buffered_output_after_the_heartbeat_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    config_file = write_job_config(trainer_config(tmp_path, tmp_path, backend="mirrored", epochs=3),
                                   tmp_path / "job.json")
    events: list[object] = []
    monkeypatch.setattr(entry, "start_heartbeat", lambda: events.append("heartbeat"))
    monkeypatch.setattr(entry, "run", lambda config: events.append(config))
    monkeypatch.setattr(entry, "end_now", lambda: events.append("end"))
    entry.main(["--config", str(config_file)])
    assert events == ["heartbeat", read_config(config_file), "end"]  # the beat starts before TensorFlow loads
    assert isinstance(events[1], TrainerConfig) and events[1].train.epochs == 3
    assert sys.stdout.line_buffering



def test_a_finished_job_ends_at_once_after_its_exit_handlers(digits_data: Path, tmp_path: Path) -> None:
    """The process skips the interpreter's teardown, not its exit handlers: the heartbeat's end line comes last and
    the model is saved."""
    config_file = write_job_config(trainer_config(digits_data, tmp_path, backend="one-device"), tmp_path / "job.json")
    done = run([PYTHON, "-m", "trainer", "--config", str(config_file)], ROOT, quiet_env(**{HEARTBEAT_ENV: "1"}),
               timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == HEARTBEAT_END_LINE
    assert (tmp_path / "model" / "train_summary.json").is_file()
