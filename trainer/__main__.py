"""Entry point of one training process: `python -m trainer --config FILE`.

FILE is the job's resolved configuration, written by the launching task (see trainer/config.py). Launched by
horovodrun (horovod backends), once (single-process strategies), or once per worker with TF_CONFIG (multiworker,
parameter-server coordinator). With `--ahead-of PID --backend NAME` it was started before FILE existed
(trainer/ahead.py): it loads the backend, then waits for FILE.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.ahead import wait_for_config
from trainer.backends import backend_module, run
from trainer.config import read_config
from trainer.heartbeat import start_heartbeat
from trainer.lean_imports import skip_unused_libraries
from trainer.process_end import end_now
from trainer.slurm_cluster import set_tf_config_from_allocation
from trainer.stop_notice import install as stop_on_signals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="the job's configuration file (JSON)")
    parser.add_argument("--ahead-of", type=int, metavar="PID", help="started ahead: wait for FILE while PID runs")
    parser.add_argument("--backend", help="the backend to load while waiting (with --ahead-of)")
    # Each line leaves in one write (unbuffered output writes the text and its newline apart, and mpirun tags each
    # write as a line of its own).
    sys.stdout.reconfigure(line_buffering=True, write_through=False)  # type: ignore[union-attr]
    arguments = parser.parse_args(argv)
    start_heartbeat()  # before TensorFlow loads
    skip_unused_libraries()  # before TensorFlow loads: 0.6 s of a core less
    stop_on_signals()  # Slurm's notice, a termination: after the report or checkpoint in progress
    set_tf_config_from_allocation()  # a multiworker job under srun
    if arguments.ahead_of is not None:
        backend_module(arguments.backend, elastic=False)
        wait_for_config(arguments.config, arguments.ahead_of)
    run(read_config(arguments.config))
    end_now()  # done, saved and said: the rest of a normal exit takes 1.5-2.5 s while the job waits


if __name__ == "__main__":
    main()
