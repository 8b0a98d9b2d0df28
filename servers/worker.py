"""The local pool's worker (make serve, make services): Prefect's process worker, which first checks each flow run
against what was deployed (servers/deploy.py: record_deployed) and refuses it, before it starts anything
(the flow run's process, the deployment's pull steps), when the pool's base job template or the flow run's
deployment (its pull steps, job variables, entrypoint, work pool) is not the one recorded, or the flow run sets a
job variable the pool does not offer. Anyone holding the API's credentials can change those through the API; the
record is written by the user who deployed, in a folder only that user writes. A refused flow run ends Crashed with
the reason as its state's message, in one line of the worker's log; the worker goes on. The worker of the local pool
is started by make serve and make services, those of the remote pool by scripts/remote_worker.sh on other hosts;
none starts without a readable record of its own pool (one line, exit 2).

    python -m servers.worker --deployed RECORD --pool POOL --name NAME
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional, cast
from uuid import UUID

import anyio.abc
from prefect.client.orchestration import PrefectClient
from prefect.exceptions import Abort
from prefect.states import Crashed
from prefect.utilities.engine import propose_state
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker, ProcessWorkerResult
from pydantic import PrivateAttr
from typing_extensions import Self

from servers.deploy import deployment_digest, digest
from servers.work_pools import OPEN_VARIABLES

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse


class RefusedRun(Exception):
    """What the worker tells Prefect's submission in place of a process id: nothing started."""


def read_record(record: Path) -> dict[str, Any] | str:
    """The record, or why there is none to check against."""
    try:
        content = json.loads(record.read_text())
    except (OSError, ValueError) as error:
        return f"no record of what was deployed to check it against ({record}: {error})"
    if not isinstance(content, dict) or not {"work_pool", "base_job_template", "deployments"} <= set(content):
        return f"no record of what was deployed to check it against ({record}: not a record of deploy.py's)"
    return cast(dict[str, Any], content)


def refusal(flow_run: FlowRun, work_pool: WorkPool, deployment: DeploymentResponse | None,
            record: dict[str, Any]) -> str | None:
    """Why the flow run may not run, or None."""
    if work_pool.name != record["work_pool"] or digest(work_pool.base_job_template) != record["base_job_template"]:
        return (f"the work pool {work_pool.name}'s base job template is not the one deployed (changed through the "
                "API since)")
    if deployment is None:
        return "the flow run has no deployment (only the deployed ones run here)"
    recorded = record["deployments"].get(str(deployment.id))
    if recorded is None:
        return f"deployment {deployment.name} ({deployment.id}) is not one that was deployed here"
    if deployment_digest(deployment) != recorded["digest"]:
        return (f"deployment {deployment.name} is not the one deployed (its pull steps, job variables, entrypoint "
                "or work pool were changed through the API since)")
    if closed := sorted(set(flow_run.job_variables or {}) - set(OPEN_VARIABLES)):
        return f"the flow run sets job variable {closed[0]}, which the work pool does not offer"
    return None


class CheckedConfiguration(ProcessJobConfiguration):
    """A process job's configuration, built only for a flow run that passes the check (else an empty one that
    carries the refusal)."""
    record: ClassVar[Path | None] = None  # set by main()
    _refusal: Optional[str] = PrivateAttr(default=None)

    @classmethod
    async def resolve_for_flow_run(cls, flow_run: FlowRun, *, client: PrefectClient, work_pool: WorkPool,
                                   worker_name: str, worker_id: UUID | None = None,
                                   deployment: DeploymentResponse | None = None) -> Self:
        """Checked against the record: the template the configuration would be built from (the worker's copy)
        and the pool as the server holds it now, the deployment (read once, here: the configuration is built
        from this one) and the flow run's own job variables."""
        if deployment is None and flow_run.deployment_id:
            deployment = await client.read_deployment(flow_run.deployment_id)
        record = read_record(cls.record) if cls.record else "no record of what was deployed (--deployed)"
        why = record if isinstance(record, str) else (
            refusal(flow_run, work_pool, deployment, record)
            or refusal(flow_run, await client.read_work_pool(work_pool.name), deployment, record))
        if why is None:
            return await super().resolve_for_flow_run(flow_run, client=client, work_pool=work_pool,
                                                      worker_name=worker_name, worker_id=worker_id,
                                                      deployment=deployment)
        refused = cls()
        refused._refusal = why
        return refused


with warnings.catch_warnings():  # Prefect's registry of worker types: this one replaces "process" in this process
    warnings.simplefilter("ignore")

    class CheckedWorker(ProcessWorker):
        """Prefect's process worker, whose flow runs' configurations are checked ones."""
        job_configuration = CheckedConfiguration

        async def run(self, flow_run: FlowRun, configuration: ProcessJobConfiguration,
                      task_status: Optional[anyio.abc.TaskStatus[int]] = None) -> ProcessWorkerResult:
            """A refused flow run: Crashed with its reason, one line here, nothing started; else Prefect's run."""
            why = getattr(configuration, "_refusal", None)
            if why is None:
                return await super().run(flow_run, configuration, task_status)
            self._logger.error(f"flow run {flow_run.name} ({flow_run.id}) refused: {why}")
            try:
                await propose_state(self.client, Crashed(message=f"refused by the worker: {why}"),
                                    flow_run_id=flow_run.id)
            except Abort:  # already ended (cancelled meanwhile)
                pass
            if task_status is not None:
                cast(Any, task_status).started(RefusedRun(why))
            return ProcessWorkerResult(status_code=0, identifier="refused")


async def work(pool: str, name: str) -> None:
    """The worker, as `prefect worker start --pool POOL --name NAME` runs it (its settings from the environment, its
    signals as Prefect's: a first TERM or Ctrl-C stops polling and lets the flow runs end, a second kills the worker;
    set here, where asyncio's own Ctrl-C handler is the one they forward to), on a pool that must exist (one it made
    itself would have Prefect's default template)."""
    from prefect.settings import PREFECT_WORKER_HEARTBEAT_SECONDS, PREFECT_WORKER_PREFETCH_SECONDS
    from prefect.utilities.processutils import setup_signal_handlers_worker
    setup_signal_handlers_worker(os.getpid(), "the process worker", print)
    worker = CheckedWorker(name=name, work_pool_name=pool, prefetch_seconds=PREFECT_WORKER_PREFETCH_SECONDS.value(),
                           heartbeat_interval_seconds=int(PREFECT_WORKER_HEARTBEAT_SECONDS.value()),
                           create_pool_if_not_found=False)
    await worker.start(printer=print)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servers.worker")
    parser.add_argument("--deployed", type=Path, required=True, help="the record of what was deployed")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--name", required=True)
    arguments = parser.parse_args(argv)
    record = read_record(arguments.deployed)
    if isinstance(record, dict) and record["work_pool"] != arguments.pool:
        record = f"{arguments.deployed} records the work pool {record['work_pool']}, not {arguments.pool}"
    if isinstance(record, str):
        print(f"error: {record}", file=sys.stderr, flush=True)
        return 2
    CheckedConfiguration.record = arguments.deployed
    try:
        asyncio.run(work(arguments.pool, arguments.name))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"Worker {arguments.name!r} stopped!", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
