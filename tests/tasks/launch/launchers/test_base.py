"""What every launcher shares: the one command every training process runs."""
from __future__ import annotations

import sys
from pathlib import Path

from tasks.launch.launchers.base import trainer_command


def test_every_training_process_runs_the_trainer_on_the_job_file_with_this_python() -> None:
    assert trainer_command(Path("/jobs/a b/c.json")) == \
        [sys.executable, "-m", "trainer", "--config", "/jobs/a b/c.json"]
