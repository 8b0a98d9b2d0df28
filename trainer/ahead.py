"""A training process started ahead of its job's configuration (tasks/launch/ahead.py): it loads TensorFlow and its
backend while the pipeline's steps before training run, then waits for the configuration file to appear (written
whole, by a rename). It ends by itself when the process that started it ahead is gone, or after WAIT_LIMIT_SECONDS.
Imports no TensorFlow."""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

POLL_SECONDS = 0.02  # a look at the file, and at the launcher's life: microseconds each
WAIT_LIMIT_SECONDS = 3600.0  # the steps before training (a user's model checked, a dataset prepared) take less
GONE_EXIT = 3  # ended without a job: its launcher gone or the wait too long


def launcher_alive(pid: int) -> bool:
    """Whether the process that started this one ahead still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another account's process of that number: the launcher's is gone
        return False
    return True


def wait_for_config(config_file: Path, launcher_pid: int, limit_seconds: float = WAIT_LIMIT_SECONDS) -> None:
    """Return once config_file exists; end this process if its launcher goes or the wait passes limit_seconds."""
    deadline = time.monotonic() + limit_seconds
    while not config_file.is_file():
        if not launcher_alive(launcher_pid) or time.monotonic() > deadline:
            logging.getLogger("trainer").warning("no job came for this process started ahead; it ends")
            sys.stdout.flush()
            os._exit(GONE_EXIT)
        time.sleep(POLL_SECONDS)
