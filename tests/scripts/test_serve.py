"""`make serve` (scripts/serve.sh) refuses a port another server holds, in one line, before it starts anything:
that server would answer the health check in place of its own, take the deployments and outlive its Ctrl-C (a
checkout's local Prefect server, left running by `make run`, is on Prefect's default port). Its Prefect answers
nothing without its credentials, and its worker runs only what was deployed: a pool template or a deployment made
or changed through the API (by anyone holding the credentials) runs nothing."""
from __future__ import annotations

import asyncio
import copy
import http.server
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from uuid import UUID

import pytest
import requests

from tests.flows.test_deployments import POOL, Served, serving
from tests.helpers import ROOT, quiet_env

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import State


class Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        return


def test_a_port_another_server_answers_on_is_refused_in_one_line(tmp_path: Path) -> None:
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    try:
        done = subprocess.run(["bash", "scripts/serve.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env=quiet_env(PREFECT_PORT=str(port), PREFECT_HOME=str(tmp_path / "prefect")))
    finally:
        other.shutdown()
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: port {port} is taken (make stop stops this checkout's local Prefect server; PREFECT_PORT=N make "
        "serve takes another port)"), done.stderr
    assert not (tmp_path / "prefect").exists()  # nothing started


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """make serve, once for this module (as tests/flows/test_deployments.py starts it)."""
    yield from serving(tmp_path_factory, np=1)


def prefect_client(client_env: dict[str, str]) -> PrefectClient:
    """Prefect's client, with the credentials of a client.env (what anyone holding them can do)."""
    from prefect.client.orchestration import PrefectClient
    return PrefectClient(client_env["PREFECT_API_URL"], auth_string=client_env["PREFECT_API_AUTH_STRING"])


async def run_to_end(client: PrefectClient, deployment_id: UUID, marker: Path, **parameters: Any) -> State:
    """A deployment run (its parameters given), until it ends or the marker a tampered command writes appears."""
    flow_run = await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
    deadline = time.monotonic() + 900
    while not marker.exists() and time.monotonic() < deadline:
        flow_run = await client.read_flow_run(flow_run.id)
        if flow_run.state is not None and flow_run.state.is_final():
            return flow_run.state
        await asyncio.sleep(1)
    raise AssertionError(f"flow run {flow_run.id}: {'the marker appeared' if marker.exists() else 'not ended'}")


async def template_changed(client: PrefectClient, marker: Path, pool: str = POOL,
                           deployment: str = "training-pipeline/train") -> State:
    """The pool's base job template given a command that writes the marker, a run of the deployment, the template
    put back: the run's end."""
    from prefect.client.schemas.actions import WorkPoolUpdate
    template = (await client.read_work_pool(pool)).base_job_template
    changed = copy.deepcopy(template)
    changed["job_configuration"]["command"] = f"touch {marker}"
    await client.update_work_pool(pool, WorkPoolUpdate(base_job_template=changed))
    try:
        return await run_to_end(client, (await client.read_deployment_by_name(deployment)).id, marker)
    finally:
        await client.update_work_pool(pool, WorkPoolUpdate(base_job_template=template))


async def template_changed_then_restored(client_env: dict[str, str], marker: Path,
                                         **parameters: Any) -> tuple[State, State]:
    """The pool's template changed for a `train` deployment run, then put back for another one with the
    parameters: their ends."""
    async with prefect_client(client_env) as client:
        refused = await template_changed(client, marker)
        train = await client.read_deployment_by_name("training-pipeline/train")
        return refused, await run_to_end(client, train.id, marker, **parameters)


TEMPLATE_REFUSED = (f"refused by the worker: the work pool {POOL}'s base job template is not the one deployed "
                    "(changed through the API since)")


def refused_lines(served: Served) -> list[str]:
    """The worker's lines (make serve's terminal) that refuse a flow run."""
    return [line for line in (served.repo.parent / "serve.log").read_text().splitlines() if ") refused: " in line]


@pytest.mark.slow  # make serve: its Prefect server, worker and model server
def test_make_serves_prefect_answers_nothing_without_its_credentials(served: Served) -> None:
    assert requests.post(f"{served.api}/flows/filter", json={}, timeout=30).status_code == 401
    user, password = served.env["PREFECT_API_AUTH_STRING"].split(":", 1)
    assert requests.post(f"{served.api}/flows/filter", json={}, auth=(user, password), timeout=30).ok
    for private in ("client.env", "serve-secret"):
        assert (served.repo / ".prefect" / private).stat().st_mode & 0o777 == 0o600, private


@pytest.mark.slow  # make serve: its Prefect server, worker and model server
def test_deployments_made_or_changed_through_the_api_do_not_run(served: Served, tmp_path: Path) -> None:
    """A deployment with a run_shell_script pull step, new or in place of a deployed one's steps: the worker
    refuses its flow run before any step runs."""
    marker = tmp_path / "pulled"
    pull = [{"prefect.deployments.steps.run_shell_script": {"script": f"touch {marker}"}}]

    async def tampered() -> list[State]:
        from prefect.client.schemas.actions import DeploymentUpdate
        async with prefect_client(served.env) as client:
            retrain = await client.read_deployment_by_name("training-pipeline/retrain")
            made = await client.create_deployment(flow_id=retrain.flow_id, name="pulled", work_pool_name=POOL,
                                                  entrypoint=retrain.entrypoint, pull_steps=pull)
            await client.update_deployment(retrain.id, DeploymentUpdate(pull_steps=pull))
            return [await run_to_end(client, made, marker), await run_to_end(client, retrain.id, marker)]

    made, changed = asyncio.run(tampered())
    assert not marker.exists()
    assert (made.type.value, changed.type.value) == ("CRASHED", "CRASHED")
    assert re.fullmatch(r"refused by the worker: deployment pulled \(\S+\) is not one that was deployed here",
                        made.message or ""), made.message
    assert changed.message == ("refused by the worker: deployment retrain is not the one deployed (its pull steps, "
                               "job variables, entrypoint or work pool were changed through the API since)")


@pytest.mark.slow  # make serve: its Prefect server, worker and model server
def test_a_pool_template_changed_through_the_api_runs_nothing_and_the_worker_goes_on(served: Served,
                                                                                     tmp_path: Path) -> None:
    """The pool's base job template given a command of one's choosing (as anyone holding the credentials can):
    the next deployment run is refused, in one line of the worker's, and ends Crashed with the reason; the template
    put back, a deployment run with a parameter trains as before."""
    marker = tmp_path / "ran"
    before = len(refused_lines(served))
    refused, trained = asyncio.run(template_changed_then_restored(served.env, marker, epochs=1))
    assert not marker.exists()
    assert refused.type.value == "CRASHED" and refused.message == TEMPLATE_REFUSED
    assert len(refused_lines(served)) == before + 1
    assert trained.type.value == "COMPLETED", trained.message
