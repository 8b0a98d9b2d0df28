"""One-process backends (mirrored, central-storage, one-device and their custom loops): one training process here."""
from __future__ import annotations

from pathlib import Path

from tasks.launch.launchers.base import Launcher, trainer_command
from tasks.launch.supervise.processes import Process
from tasks.params import Params


def processes(params: Params, controller: str | None, config_file: Path, env: dict[str, str],
              ports: list[int] | None) -> list[Process]:
    """The one process, rank 0."""
    return [Process(trainer_command(config_file), env, "0")]


LAUNCHER = Launcher(processes)
