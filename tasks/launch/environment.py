"""What the processes of a training job inherit from this machine, the policy written once (docs/security.md):

- An allow-list, not this machine's whole environment: the names in FORWARDED_NAMES and those starting with
  FORWARDED_PREFIXES, never one that looks secret (is_secret). Horovod with Gloo writes every variable it is given
  onto the ssh command line of its remote ranks, and a command line is readable by every user of a host (`ps`).
- No tracking setting at all: rank 0 prints its epoch metrics and the launcher logs them (tasks/launch/output), so
  the tracking URI (which can hold `user:password@`) and the MLFLOW_* settings never reach a rank.
- Every command line the launcher prints or logs, and every line a rank prints, goes through redact()
  (tasks/redaction.py).
"""
from __future__ import annotations

import os
from typing import Mapping

from tasks.paths import ROOT
from tasks.redaction import is_secret
from trainer.checkpoint_files import FAIL_BEFORE_SAVE_ENV
from trainer.protocol import METRICS_SPOOL_ENV

FORWARDED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "SSH_AUTH_SOCK",  # the launcher's own ssh (horovodrun's, mpirun's) reaches the hosts with the user's agent
    "VIRTUAL_ENV", "LD_LIBRARY_PATH", "PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES", "KERAS_HOME",
    "SLURM_CONF",  # where the Slurm commands of a train.scheduler slurm job find the cluster
    FAIL_BEFORE_SAVE_ENV,  # tests only: a rank lost between its last checkpoint and the model's save
})
FORWARDED_PREFIXES = ("LC_", "TF_", "XLA_", "CUDA_", "NCCL_", "HOROVOD_", "GLOO_", "OMPI_", "PMIX_", "OMP_", "KMP_")


# Open MPI's ranks wait for a peer by polling without pause unless a host holds more ranks than its slots; Horovod's
# background thread waits so at every cycle, on a core the rank's TensorFlow threads need (a peer late by a moment is
# a core lost for that moment). Yielding while waiting: np=2 on 2 cores here trained 6 epochs of the built-in
# dataset in 6.3 s wall and 10.0 s of CPU against 7.8 s and 12.5 s, at about 20,000 images/s against 16,000. A
# user's own setting (forwarded: OMPI_ names are) wins.
JOB_DEFAULTS = {"OMPI_MCA_mpi_yield_when_idle": "1"}


def forwarded(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed, non-secret part of an environment."""
    return {name: value for name, value in environ.items()
            if (name in FORWARDED_NAMES or name.startswith(FORWARDED_PREFIXES)) and not is_secret(name, value)}


def rank_environment(spool_metrics: bool = False) -> dict[str, str]:
    """The environment each process of a job gets: the allow-listed part of this one, this checkout on the Python
    path, quiet and unbuffered; with `spool_metrics` (rank 0 shares this machine's filesystem), rank 0 writes each
    epoch's metrics to the spool beside the checkpoints before it prints them."""
    env = forwarded(os.environ) | {
        "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return env | {METRICS_SPOOL_ENV: "1"} if spool_metrics else env
