"""The services' processes, each started by processes.start in a session of its own: the MLflow and Prefect
servers as the service user, their settings in their environment (never on a command line), and the worker."""
from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timezone
from typing import Callable

from servers import processes
from servers.deploy import DEPLOYED_FILE, LOCAL_POOL, record_deployed, worker_command, worker_name
from servers.processes import BIN, ServerFailed
from servers.setup import ROLE, Place, Users, client_env, worker_env, worker_folder
from tasks.logs import logger
from tasks.paths import ROOT, code_repository

log = logger("services")


def allowed_hosts(place: Place, port: int) -> str:
    """The names a client may call this machine by, with and without the port."""
    names = dict.fromkeys([place.host, "localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn()])
    return ",".join(f"{name},{name}:{port}" for name in names)


def start_mlflow(place: Place, users: Users, secrets: dict[str, str]) -> None:
    home = place.home
    env = dict(os.environ, HOME=str(home / "home"), PGPASSFILE=str(home / "pgpass"),
               MLFLOW_AUTH_CONFIG_PATH=str(home / "mlflow-auth.ini"),  # the auth app reads it, for every search too
               MLFLOW_FLASK_SERVER_SECRET_KEY=secrets["MLFLOW_SECRET_KEY"],
               MLFLOW_BACKEND_STORE_URI=f"postgresql+psycopg2://{ROLE}@127.0.0.1:{place.pg_port}/mlflow",
               MLFLOW_ARTIFACTS_DESTINATION=place.artifacts,
               # the Host headers it answers (MLflow refuses others with 403): this address and this machine's names
               MLFLOW_SERVER_ALLOWED_HOSTS=os.environ.get("SERVICES_ALLOWED_HOSTS")
               or allowed_hosts(place, place.mlflow_port),
               # MLflow's job runner (huey consumers for GenAI judges and trace rollups), which ringflow never asks:
               # 4 more processes and about 10 s of CPU at every start
               MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    command = [*users.as_service, str(BIN / "mlflow"), "server", "--host", place.host, "--port",
               str(place.mlflow_port), "--serve-artifacts", "--workers", "2", "--app-name", "basic-auth"]
    # in the service user's own folder (it may not enter the checkout, nor read a .env there)
    processes.start("mlflow", command, place.run, place.logs, env, cwd=home / "home")
    processes.wait_http("mlflow", f"http://{place.host}:{place.mlflow_port}/health", place.run / "mlflow.pid",
                        place.logs / "mlflow.log")


# Prefect's waits on PostgreSQL (5 s to connect, 10 s a statement): on a host busy training, a connection at the
# server's start can take longer, and the server exits (Prefect's issues #22314, #21225: timeouts under load)
PREFECT_DATABASE_SECONDS = {"PREFECT_SERVER_DATABASE_CONNECTION_TIMEOUT": "30", "PREFECT_SERVER_DATABASE_TIMEOUT": "30"}


def start_prefect(place: Place, users: Users, secrets: dict[str, str]) -> None:
    home = place.home
    env = dict(os.environ, HOME=str(home / "home"), PGPASSFILE=str(home / "pgpass"),
               PREFECT_HOME=str(home / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_API_AUTH_STRING=f"{ROLE}:{secrets['PREFECT_PASSWORD']}",
               PREFECT_SERVER_DATABASE_CONNECTION_URL=f"postgresql+asyncpg://{ROLE}@127.0.0.1:{place.pg_port}/prefect",
               **PREFECT_DATABASE_SECONDS,
               PREFECT_UI_API_URL=f"http://{place.host}:{place.prefect_port}/api")
    command = [*users.as_service, str(BIN / "prefect"), "server", "start", "--host", place.host, "--port",
               str(place.prefect_port)]
    processes.start("prefect", command, place.run, place.logs, env, cwd=home / "home")
    processes.wait_http("prefect", f"http://{place.host}:{place.prefect_port}/api/health",
                        place.run / "prefect.pid", place.logs / "prefect.log")


def git(*arguments: str) -> str:
    """git in the repository whose deployments the services make: the project's (the checkout's when none)."""
    done = subprocess.run(["git", *arguments], cwd=code_repository(), capture_output=True, text=True, check=True)
    return done.stdout.strip()


def mirror_checkout(place: Place) -> tuple[str, str]:
    """The repository the remote pool's workers (and, for a project, the local pool's) pull from (a bare one here,
    unless RINGFLOW_REPOSITORY names one) and the commit they run: the project's HEAD (this checkout's when no
    project is named); both exported for the deployments and the worker. Root's git reads the config and runs the
    hooks of that repository and of the bare one: neither is writable by the worker's user (choose_users refuses one
    that can write them)."""
    repository = os.environ.get("RINGFLOW_REPOSITORY")
    if not repository:
        repository = str(place.home / "ringflow.git")
        if not os.path.isdir(repository):
            git("init", "-q", "--bare", repository)
        git("push", "-q", "--force", repository, "HEAD:refs/heads/main")
    commit = git("rev-parse", "HEAD")
    os.environ.update(RINGFLOW_REPOSITORY=repository, RINGFLOW_COMMIT=commit)
    if git("status", "--porcelain", "--untracked-files=no"):
        log.info(f"the remote pool runs commit {commit[:12]}: uncommitted changes are not in it")
    return repository, commit


def start_worker(place: Place, users: Users, deploy: Callable[[], None]) -> None:
    """The deployments, then the worker of the local pool, which logs to both servers (client.env's settings). It
    runs this checkout's code in a workspace of its own (SERVICES_HOME/worker, made as its user at every start):
    what its flow runs write lands there, and its user writes nothing root runs (setup.py: choose_users)."""
    os.environ.update(client_env(place))
    deploy()
    record_deployed(place.home)  # what the workers check each flow run against (worker.py), the remote pool's too
    folder = worker_folder(place, users)
    env = dict(os.environ, **worker_env(folder))
    filled = subprocess.run([*users.as_worker, str(BIN / "python"), "-m", "servers.setup", str(folder)],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if filled.returncode != 0:
        raise ServerFailed(f"the worker's workspace in {folder} could not be made: "
                           f"{(filled.stderr.strip().splitlines() or ['no output'])[-1]}")
    command = [*users.as_worker, *worker_command(place.home / DEPLOYED_FILE)]
    started = datetime.now(timezone.utc)
    processes.start("worker", command, place.run, place.logs, env, cwd=ROOT)
    wait_worker(place, started)


def worker_heartbeat(place: Place, name: str) -> datetime | None:
    """When the pool last heard from the worker called name, by the Prefect API; None before its first beat."""
    settings = client_env(place)
    request = urllib.request.Request(f"{settings['PREFECT_API_URL']}/work_pools/{LOCAL_POOL}/workers/filter",
                                     data=b"{}", method="POST", headers={"Content-Type": "application/json"})
    credentials = settings.get("PREFECT_API_AUTH_STRING")
    if credentials:
        request.add_header("Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            workers = json.load(answer)
    except (OSError, ValueError):
        return None
    beats = [worker.get("last_heartbeat_time") for worker in workers if worker.get("name") == name]
    return max((datetime.fromisoformat(beat) for beat in beats if beat), default=None)


def wait_worker(place: Place, started: datetime, seconds: float = 180) -> None:
    """Until the worker started at `started` has polled its pool once (its user, its workspace and Python reached):
    what follows a start sees the worker, not servers/run_as.sh still at work."""
    name = worker_name()
    log = place.logs / "worker.log"
    deadline = time.monotonic() + seconds
    while (beat := worker_heartbeat(place, name)) is None or beat < started:
        if processes.live_pid(place.run / "worker.pid") is None:
            raise processes.ended("worker", log)
        if time.monotonic() > deadline:
            raise ServerFailed(f"the worker did not poll its pool in {seconds / 60:g} minutes; see {log}")
        time.sleep(0.5)
