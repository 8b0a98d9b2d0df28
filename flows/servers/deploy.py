"""The work pools and the deployments of prefect.yaml on the Prefect server of PREFECT_API_URL: the local pool's,
and the remote pool's too when RINGFLOW_REPOSITORY names the repository its workers pull (make services)."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import IO

import yaml

from flows.servers.processes import BIN
from flows.work_pools import base_job_template, opened_variables
from tasks.paths import ROOT

LOCAL_POOL, REMOTE_POOL = "ringflow-local", "ringflow-remote"


class DeployFailed(RuntimeError):
    """prefect.yaml opens a variable the pools fix, or Prefect's own commands failed."""


def deployments_on(pool: str, prefect_file: Path) -> list[str]:
    """The names of prefect.yaml's deployments on a work pool."""
    deployments = (yaml.safe_load(prefect_file.read_text()) or {}).get("deployments") or []
    return [deployment["name"] for deployment in deployments if deployment["work_pool"]["name"] == pool]


def deploy(output: IO[str] | None = None) -> None:
    """The pools (their base job template fixes the worker's command, environment and directory: no flow run
    chooses them), each running one flow run at a time, then the deployments on them."""
    prefect_file = ROOT / "prefect.yaml"
    if opened := opened_variables(prefect_file):
        raise DeployFailed(f"{prefect_file}: deployment {opened[0]} is a job variable the work pools fix (the "
                           "worker's command, environment and directory are never chosen by a deployment or a run: "
                           "flows/work_pools.py)")
    pools = [LOCAL_POOL, *([REMOTE_POOL] if os.environ.get("RINGFLOW_REPOSITORY") else [])]
    names: list[str] = []
    with tempfile.NamedTemporaryFile("w", suffix=".json") as template:
        json.dump(base_job_template(), template)
        template.flush()
        for pool in pools:
            prefect(["work-pool", "create", pool, "--type", "process", "--base-job-template", template.name,
                     "--overwrite"], output, quiet=True)
            prefect(["work-pool", "set-concurrency-limit", pool, "1"], output, quiet=True)
            names += deployments_on(pool, prefect_file)
    prefect(["--no-prompt", "deploy", *[word for name in names for word in ("--name", name)]], output)


def prefect(arguments: list[str], output: IO[str] | None, quiet: bool = False) -> None:
    """One of Prefect's commands, in the checkout; its output to `output` (the terminal when None; nowhere when
    quiet and None)."""
    stdout = output if output is not None else subprocess.DEVNULL if quiet else None
    done = subprocess.run([str(BIN / "prefect"), *arguments], cwd=ROOT, stdout=stdout,
                          stderr=subprocess.STDOUT if output is not None else None)
    if done.returncode != 0:
        raise DeployFailed(f"prefect {' '.join(arguments[:2])} failed (exit {done.returncode})")
