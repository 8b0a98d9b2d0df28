"""One-process backends: one trainer process on this machine, rank 0, with the job's environment."""
from __future__ import annotations

import sys
from pathlib import Path

from tasks.launch.launchers.process import LAUNCHER
from tasks.params import Params
from trainer.config import TrainParams


def test_a_one_process_job_is_the_trainer_here_as_rank_0_with_the_given_environment() -> None:
    (process,) = LAUNCHER.processes(Params(train=TrainParams(backend="central-storage", np=3)), None, Path("/j/c.json"),
                           {"A": "1"}, None)
    assert process.command == [sys.executable, "-m", "trainer", "--config", "/j/c.json"]
    assert (process.env, process.label, process.hosts, process.waited) == ({"A": "1"}, "0", ("localhost",), True)
