"""What the processes of a training job inherit from this machine, the policy written once (docs/security.md):

- An allow-list, not this machine's whole environment: the names in FORWARDED_NAMES and those starting with
  FORWARDED_PREFIXES, never one that looks secret (is_secret). Horovod with Gloo writes every variable it is given
  onto the ssh command line of its remote ranks, and a command line is readable by every user of a host (`ps`).
- What rank 0's MLflow client needs (the tracking URI, which can hold `user:password@`, and the MLFLOW_* settings,
  tokens included) travels in a file of mode 0600 beside the job's configuration, named by RANK_SECRETS_ENV and
  removed when the job ends; only when rank 0 logs to the run itself (it shares this machine's filesystem).
- Every command line the launcher prints or logs, and every line a rank prints, goes through redact()
  (tasks/redaction.py).
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from tasks.paths import ROOT
from tasks.redaction import is_secret
from tasks.tracking.mlflow_store import tracking_uri
from trainer.protocol import RANK_SECRETS_ENV

FORWARDED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "SSH_AUTH_SOCK",  # the launcher's own ssh (horovodrun's, mpirun's) reaches the hosts with the user's agent
    "VIRTUAL_ENV", "LD_LIBRARY_PATH", "PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES", "KERAS_HOME",
    "SLURM_CONF",  # where the Slurm commands of a train.scheduler slurm job find the cluster
})
FORWARDED_PREFIXES = ("LC_", "TF_", "XLA_", "CUDA_", "NCCL_", "HOROVOD_", "GLOO_", "OMPI_", "PMIX_", "OMP_", "KMP_")
SECRETS_FILE_NAME = ".rank-secrets.json"  # beside the job's configuration file


def forwarded(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed, non-secret part of an environment."""
    return {name: value for name, value in environ.items()
            if (name in FORWARDED_NAMES or name.startswith(FORWARDED_PREFIXES)) and not is_secret(name, value)}


def tracking_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What rank 0's MLflow client needs: the tracking URI of this run and the MLFLOW_* settings."""
    settings = {name: value for name, value in environ.items() if name.startswith("MLFLOW_") and name != "MLFLOW_RUN_ID"}
    return settings | {"MLFLOW_TRACKING_URI": tracking_uri()}


@contextmanager
def held_rank_secrets(job_dir: Path, values: Mapping[str, str]) -> Iterator[Path]:
    """`values` as a JSON file only its owner can read (created so: never readable by others, even briefly),
    locked while the block runs (the job) and removed after it; a launcher killed meanwhile leaves it unlocked, and
    the next launch removes it (remove_abandoned_secrets)."""
    path = job_dir / SECRETS_FILE_NAME
    writing = job_dir / f"{SECRETS_FILE_NAME}.new"  # locked before it has its name: no one finds it unlocked
    descriptor = os.open(writing, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, json.dumps(dict(values)).encode())
        os.replace(writing, path)
        yield path
    finally:
        path.unlink(missing_ok=True)
        writing.unlink(missing_ok=True)
        os.close(descriptor)


def remove_abandoned_secrets(folders: list[Path]) -> list[Path]:
    """The secrets files in the job directories in these folders (a run's folder holds its jobs' directories) that no live launcher holds (it was killed
    before it could remove them): removed; the ones removed."""
    removed = []
    for path in sorted({found for folder in folders for found in folder.glob(f"*/{SECRETS_FILE_NAME}")}):
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except OSError:  # removed meanwhile
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink(missing_ok=True)
            removed.append(path)
        except BlockingIOError:  # its launcher is running
            pass
        finally:
            os.close(descriptor)
    return removed


def rank_environment(run_id: str | None = None, secrets_file: Path | None = None) -> dict[str, str]:
    """The environment each process of a job gets: the allow-listed part of this one, this checkout on the Python
    path, quiet and unbuffered; with `run_id`, the MLflow run rank 0 logs to and the file of what its client needs
    (None: rank 0 prints its metrics for the launcher)."""
    env = forwarded(os.environ) | {
        "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if run_id:
        if secrets_file is None:
            raise ValueError("rank 0 logs to an MLflow run only with the file of its tracking settings")
        env |= {"MLFLOW_RUN_ID": run_id, RANK_SECRETS_ENV: str(secrets_file)}
    return env


