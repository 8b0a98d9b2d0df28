"""Several training jobs run one after the other in one new process, through the dispatch `python -m trainer`
uses: for the backends whose set-up must come before TensorFlow's runtime starts (Horovod's threads, logical CPU
devices), and for MPI's singleton start, which changes the environment of the process that makes it."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import ROOT, quiet_env
from tests.trainer.configs import write_job_config
from trainer.config import TrainerConfig
from trainer.protocol import HEARTBEAT_ENV

START, FAILED = "test_run_starts", "test_run_failed"
RUN_EACH = f"""
import sys
from trainer.backends import run
from trainer.config import read_config
for path in sys.argv[1:]:
    print("{START}", path, flush=True)
    try:
        run(read_config(path))
    except Exception as error:  # ends this run only
        print("{FAILED}", type(error).__name__, error, flush=True)
import os
os._exit(0)  # all said: no teardown of Horovod and TensorFlow to wait for
"""


@dataclass(frozen=True)
class Trained:
    """One job of the process: its configuration and the lines it printed."""
    config: TrainerConfig
    lines: list[str]


def train_in_one_process(configs: dict[str, TrainerConfig], work: Path) -> dict[str, Trained]:
    """Run the jobs in order in one process; each job's printed lines by its name."""
    files = [write_job_config(config, work / f"{name}.json") for name, config in configs.items()]
    env = quiet_env()
    env.pop(HEARTBEAT_ENV, None)
    done = subprocess.run([sys.executable, "-c", RUN_EACH, *map(str, files)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    sections: list[list[str]] = []
    for line in done.stdout.splitlines():
        if line.startswith(START):
            sections.append([])
        elif sections:
            sections[-1].append(line)
    assert len(sections) == len(configs), done.stdout[-3000:] + done.stderr[-3000:]
    return {name: Trained(config, lines) for (name, config), lines in zip(configs.items(), sections)}
