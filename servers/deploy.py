"""The work pools and the deployments of prefect.yaml on the Prefect server of PREFECT_API_URL: the local pool's,
and the remote pool's too when RINGFLOW_REPOSITORY names the repository its workers pull (make services); and the
record of what was deployed on each pool (a digest of its base job template and of each deployment; the remote
pool's, deployed-remote.json, is copied to the hosts of its workers), which the pool's workers
(servers/worker.py) check before they start anything for a flow run: a template or a deployment changed through
the API since (by anyone holding the API's credentials) is refused."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import yaml

from servers.processes import BIN, open_file
from servers.work_pools import base_job_template, opened_variables
from tasks.paths import code_repository

if TYPE_CHECKING:
    from prefect.client.schemas.responses import DeploymentResponse

LOCAL_POOL, REMOTE_POOL = "ringflow-local", "ringflow-remote"
# the records, in a folder only the deploying user writes
DEPLOYED_FILE, REMOTE_DEPLOYED_FILE = "deployed.json", "deployed-remote.json"
RECORDS = {LOCAL_POOL: DEPLOYED_FILE, REMOTE_POOL: REMOTE_DEPLOYED_FILE}
# what decides what a deployment's flow run executes: the code it pulls and loads, and where (not its parameters,
# which a run may choose, nor its schedule or description)
DEPLOYMENT_FIELDS = ("entrypoint", "path", "pull_steps", "job_variables", "work_pool_name", "storage_document_id",
                     "infrastructure_document_id", "flow_id")


class DeployFailed(RuntimeError):
    """prefect.yaml opens a variable the pools fix, or Prefect's own commands failed."""


def deployments_on(pool: str, prefect_file: Path) -> list[str]:
    """The names of prefect.yaml's deployments on a work pool."""
    deployments = (yaml.safe_load(prefect_file.read_text()) or {}).get("deployments") or []
    return [deployment["name"] for deployment in deployments if deployment["work_pool"]["name"] == pool]


def deploy(output: IO[str] | None = None) -> None:
    """The pools (their base job template fixes the worker's command, environment and directory: no flow run
    chooses them), each running one flow run at a time, then the deployments on them."""
    prefect_file = code_repository() / "prefect.yaml"
    if opened := opened_variables(prefect_file):
        raise DeployFailed(f"{prefect_file}: deployment {opened[0]} is a job variable the work pools fix (the "
                           "worker's command, environment and directory are never chosen by a deployment or a run: "
                           "servers/work_pools.py)")
    names: list[str] = []
    with tempfile.NamedTemporaryFile("w", suffix=".json") as template:
        json.dump(base_job_template(), template)
        template.flush()
        for pool in deployed_pools():
            prefect(["work-pool", "create", pool, "--type", "process", "--base-job-template", template.name,
                     "--overwrite"], output, quiet=True)
            prefect(["work-pool", "set-concurrency-limit", pool, "1"], output, quiet=True)
            names += deployments_on(pool, prefect_file)
    prefect(["--no-prompt", "deploy", *[word for name in names for word in ("--name", name)]], output)


def deployed_pools() -> list[str]:
    """The pools deploy() makes: the local one, and the remote one when RINGFLOW_REPOSITORY names the repository its
    workers pull."""
    return [LOCAL_POOL, *([REMOTE_POOL] if os.environ.get("RINGFLOW_REPOSITORY") else [])]


def prefect(arguments: list[str], output: IO[str] | None, quiet: bool = False) -> None:
    """One of Prefect's commands, in the project (code_repository(): the checkout when no project is named); its
    output to `output` (the terminal when None; nowhere when quiet and None)."""
    stdout = output if output is not None else subprocess.DEVNULL if quiet else None
    done = subprocess.run([str(BIN / "prefect"), *arguments], cwd=code_repository(), stdout=stdout,
                          stderr=subprocess.STDOUT if output is not None else None)
    if done.returncode != 0:
        raise DeployFailed(f"prefect {' '.join(arguments[:2])} failed (exit {done.returncode})")


def digest(value: Any) -> str:
    """sha256 of the value's canonical JSON (keys sorted, no spaces)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def deployment_digest(deployment: DeploymentResponse) -> str:
    return digest(deployment.model_dump(mode="json", include=set(DEPLOYMENT_FIELDS)))


async def deployed_on(pool: str, names: list[str]) -> list[DeploymentResponse]:
    """The deployments of those names on the pool, as the server holds them: of two of one name (another flow's,
    made through the API before), the one updated last, which `prefect deploy` just did."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas import filters
    async with get_client() as client:
        found = await client.read_deployments(
            deployment_filter=filters.DeploymentFilter(name=filters.DeploymentFilterName(any_=names)),
            work_pool_filter=filters.WorkPoolFilter(name=filters.WorkPoolFilterName(any_=[pool])))
    newest: dict[str, DeploymentResponse] = {}
    for deployment in sorted(found, key=lambda found: str(found.updated)):
        newest[deployment.name] = deployment
    return list(newest.values())


def record_deployed(folder: Path) -> None:
    """After deploy(): the record of each pool it made, in `folder` (RECORDS: the remote pool's is the one the
    hosts of its workers get a copy of)."""
    for pool in deployed_pools():
        record_pool(folder / RECORDS[pool], pool)


def record_pool(record: Path, pool: str) -> None:
    """The digests of the pool's base job template (the one deploy() gives it) and of its deployments (read back
    from the server, as its workers read them: the remote ones with the repository and commit their pull steps
    clone, resolved when `prefect deploy` ran), into `record` (mode 0644: the worker's user reads it, and it is no
    secret; a new file, renamed over the old one: no link followed)."""
    deployments = asyncio.run(deployed_on(pool, deployments_on(pool, code_repository() / "prefect.yaml")))
    content = {"work_pool": pool, "base_job_template": digest(base_job_template()),
               "deployments": {str(deployment.id): {"name": deployment.name, "digest": deployment_digest(deployment)}
                               for deployment in deployments}}
    temporary = record.with_name(f".{record.name}.new")
    temporary.unlink(missing_ok=True)
    descriptor = open_file(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.fchmod(descriptor, 0o644)
    with os.fdopen(descriptor, "w") as file:
        json.dump(content, file, indent=1)
    os.replace(temporary, record)


def worker_command(record: Path) -> list[str]:
    """The local pool's worker, checking each flow run against `record` (servers/worker.py)."""
    return [str(BIN / "python"), "-m", "servers.worker", "--deployed", str(record), "--pool", LOCAL_POOL,
            "--name", worker_name()]


def worker_name() -> str:
    """The name the local pool's worker polls under."""
    return f"ringflow-worker-{socket.gethostname()}"
