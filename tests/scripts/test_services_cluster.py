"""`ringflow services` for a team's project (made by `ringflow init`, with a model of its own) on the test cluster: the
servers bind the head's address on the hosts' network, so authentication is on (no request without credentials,
credentials in files of mode 0600, no password on any command line); the project's deployments run a clone of its
commit, on the local pool's worker and on a worker of the remote pool on a host (with the ringflow installed there),
tracked on the head's servers; that worker checks each flow run against the record of what was deployed (the
services' deployed-remote.json, copied to the host with client.env) and runs nothing of a pool template changed
through the API."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest
import requests

from tasks.launch.remote.addresses import head_address
from tests.helpers import BIN, ROOT, run
from tests.installed import installed_ringflow
from tests.scripts.services import OWN_MODEL, Services, project_services, with_own_model
from tests.scripts.test_serve import prefect_client, template_changed
from tests.tasks.launch.cluster_hosts import cluster_up, hosts_of, on_host

if TYPE_CHECKING:
    from prefect.client.schemas.objects import State

pytestmark = pytest.mark.slow  # the test cluster, PostgreSQL, two servers, workers, a whole pipeline on a host
TEST_CLUSTER = "g"  # beside cluster h's modules (tests/parallel.py)
H1 = hosts_of(TEST_CLUSTER)[0]


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    yield from cluster_up(cluster=TEST_CLUSTER)


@pytest.fixture(scope="module")
def services(cluster: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """`ringflow services` of ringflow installed from its wheel (not the checkout's editable install)."""
    installed = installed_ringflow(tmp_path_factory.mktemp("installed"))
    yield from project_services(tmp_path_factory.mktemp("team") / "project", prepare=with_own_model,
                                installed=installed, SERVICES_HOST=head_address(cluster))


def passwords(services: Services) -> list[str]:
    return [line.split("=", 1)[1] for line in (services.home / "secrets.env").read_text().splitlines()]


def test_without_credentials_both_servers_refuse(services: Services) -> None:
    mlflow_uri, prefect_api = services.client["MLFLOW_TRACKING_URI"], services.client["PREFECT_API_URL"]
    assert not mlflow_uri.startswith("http://127.") and not prefect_api.startswith("http://127.")
    refused = requests.post(f"{mlflow_uri}/api/2.0/mlflow/experiments/search", json={"max_results": 1}, timeout=30)
    assert refused.status_code == 401
    assert "experiments" in services.mlflow("experiments/search", {"max_results": 1})
    assert requests.post(f"{prefect_api}/flows/filter", json={}, timeout=30).status_code == 401
    user, password = services.client["PREFECT_API_AUTH_STRING"].split(":", 1)
    assert requests.post(f"{prefect_api}/flows/filter", json={}, auth=(user, password), timeout=30).ok


def test_credentials_stay_in_private_files_and_off_every_command_line(services: Services) -> None:
    for name in ("secrets.env", "client.env", "pgpass", "mlflow-auth.ini"):
        assert (services.home / name).stat().st_mode & 0o777 == 0o600, name
    command_lines = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
    assert "mlflow server" in command_lines and "prefect server start" in command_lines
    for secret in passwords(services):
        assert secret not in command_lines
        assert secret not in (services.home / "logs" / "mlflow.log").read_text()


@pytest.fixture(scope="module")
def remote_worker(services: Services) -> Iterator[Path]:
    """scripts/remote_worker.sh on H1 (the hosts share this filesystem) with the services' client.env and record,
    in its own process group; its log."""
    log = services.repo.parent / f"worker-{H1}.log"
    arguments = f"{services.home}/client.env {services.home}/deployed-remote.json"
    started = on_host(H1, f"cd {ROOT} && (setsid bash scripts/remote_worker.sh {arguments} > {log} 2>&1 "
                          "< /dev/null & echo $!)")
    assert started.returncode == 0, started.stderr
    worker = int(started.stdout.split()[-1])
    yield log
    os.killpg(worker, signal.SIGTERM)
    time.sleep(1)
    subprocess.run(["pkill", "-KILL", "-g", str(worker)], check=False)


def test_a_remote_worker_without_its_pools_record_starts_nothing(services: Services, tmp_path: Path) -> None:
    client_env = f"{services.home}/client.env"
    assert f"copies of {client_env} and {services.home}/deployed-remote.json" in services.log.read_text()
    local = "records the work pool ringflow-local, not ringflow-remote"
    for record, problem in ((tmp_path / "missing.json", "no record of what was deployed"),
                            (services.home / "deployed.json", local)):
        done = run(["bash", "scripts/remote_worker.sh", client_env, str(record)], ROOT, services.env,
                   timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("error: ") and str(record) in last and problem in last, done.stderr


def test_a_remote_pool_template_changed_through_the_api_runs_nothing_on_the_host(services: Services,
                                                                                 remote_worker: Path,
                                                                                 tmp_path: Path) -> None:
    async def changed() -> State:
        async with prefect_client(services.client) as client:
            return await template_changed(client, tmp_path / "ran", pool="ringflow-remote",
                                          deployment="training-pipeline/train-remote")

    refused = asyncio.run(changed())
    assert not (tmp_path / "ran").exists()
    assert (refused.type.value, refused.message) == ("CRASHED", (
        "refused by the worker: the work pool ringflow-remote's base job template is not the one deployed (changed "
        "through the API since)"))
    assert len([line for line in remote_worker.read_text().splitlines() if ") refused: " in line]) == 1


def deployment_run(services: Services, deployment: str) -> dict[str, dict[str, str]]:
    """`prefect deployment run training-pipeline/DEPLOYMENT --param epochs=2 --param np=1 --watch` from a user's
    shell: the MLflow run it made (its info, tags and params, each a dict)."""
    env = dict(services.env, **services.client)
    done = run([str(BIN / "prefect"), "deployment", "run", f"training-pipeline/{deployment}", "--param",
                "epochs=2", "--param", "np=1", "--watch", "--watch-timeout", "900"], services.repo, env,
               timeout=1200)
    assert done.returncode == 0 and "Completed" in done.stdout, (done.stdout + done.stderr)[-3000:]
    experiment = services.mlflow("experiments/get-by-name?experiment_name=ringflow")["experiment"]
    found = services.mlflow("runs/search", {"experiment_ids": [experiment["experiment_id"]],
                                            "order_by": ["attributes.start_time DESC"], "max_results": 1})["runs"][0]
    return {"info": found["info"], "tags": {tag["key"]: tag["value"] for tag in found["data"]["tags"]},
            "params": {param["key"]: param["value"] for param in found["data"]["params"]}}


def test_a_deployment_of_the_project_runs_its_commit_on_the_local_worker(services: Services) -> None:
    made = deployment_run(services, "train")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=services.repo, capture_output=True, text=True).stdout
    assert made["info"]["status"] == "FINISHED" and made["tags"]["mlflow.source.git.commit"] == commit.strip()
    assert made["tags"]["mlflow.source.git.repoURL"] == str(services.home / "ringflow.git")  # the clone's origin
    assert made["params"]["model.source"].startswith(f"{OWN_MODEL}@")  # the project's own model file
    assert not (services.repo / "outputs").exists()  # the worker wrote nothing into the project
    command_lines = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout.splitlines()
    deployed = str(services.home / "deployed.json")  # these services' worker (other tests run workers of their own)
    workers = [line for line in command_lines if "-m servers.worker " in line and deployed in line]
    installed = Path(services.command[0]).parent  # ringflow installed from its wheel: its environment's Python
    assert workers and all(line.startswith(f"{installed / 'python'} ") for line in workers), workers


def test_a_worker_on_a_host_pulls_the_commit_and_runs_the_deployment_there(services: Services,
                                                                          remote_worker: Path) -> None:
    """After the refused run too (the test above): the worker goes on. The commit's params.yaml names a model of the
    team's own: the ranks on the host built it from the file the worker pulled."""
    made = deployment_run(services, "train-remote")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=services.repo, capture_output=True, text=True).stdout
    assert (made["info"]["status"], made["tags"]["ringflow.host"]) == ("FINISHED", H1)
    assert made["tags"]["mlflow.source.git.commit"] == commit.strip()  # the deployment's commit, pulled on the host
    assert made["params"]["train.model"] == OWN_MODEL and made["params"]["model.source"].startswith(f"{OWN_MODEL}@")
    run_id = made["info"]["run_id"]
    served = list(Path(services.home / "mlflow-artifacts").glob(f"*/{run_id}/artifacts/savedmodel/saved_model.pb"))
    assert len(served) == 1  # through the head's server: the host wrote nothing into the head's store itself
