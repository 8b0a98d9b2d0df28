"""make services: a team's ringflow servers on this machine, in the foreground; Ctrl-C (or `make services-down` from
another shell) stops them, and a second `make services` finds their data again.

  PostgreSQL (Debian's), a database cluster of ringflow's own under $SERVICES_HOME/postgres, run as an unprivileged
    user (PostgreSQL refuses root) and listening on 127.0.0.1 only;
  the MLflow tracking server on it (database mlflow), serving the artifacts itself (--serve-artifacts; into
    $SERVICES_HOME/mlflow-artifacts, or SERVICES_ARTIFACTS, e.g. s3://bucket/prefix);
  the Prefect server on it (database prefect, through asyncpg);
  the work pool, the deployments of prefect.yaml and a worker that logs to both servers, as `make serve` does;
  the remote pool, whose workers on other hosts (scripts/remote_worker.sh) pull this checkout's commit from a bare
  repository here ($SERVICES_HOME/ringflow.git; RINGFLOW_REPOSITORY names another, e.g. an ssh URL).

SERVICES_HOST (127.0.0.1) is the address the two servers bind (SERVICES_ALLOWED_HOSTS: the names MLflow answers to,
by default that address and this machine's names). Authentication is on at every address, loopback included (every
local user reaches 127.0.0.1): MLflow's basic-auth app, Prefect's auth string. Passwords are generated once into
$SERVICES_HOME (files of mode 0600) and reach the servers through those files and their environment, never a
command line; clients take them from $SERVICES_HOME/client.env. Ports: MLFLOW_PORT (5000), PREFECT_PORT (4200),
POSTGRES_PORT (5433). Started by root, the servers run as an unprivileged service user (SERVICES_USER,
ringflow-services, made for it; PostgreSQL as its own), and the worker as another (SERVICES_WORKER_USER,
ringflow-worker, made for it; never root), in a workspace of its own ($SERVICES_HOME/worker), writing nothing root runs.
"""
from __future__ import annotations

import os
import signal
import sys

from servers import processes
from servers.deploy import REMOTE_DEPLOYED_FILE, deploy
from servers.postgres import Postgres
from servers.processes import BIN, ServerFailed, Stop
from servers.setup import (
    ROLE,
    STOP_COMMAND,
    WORKER_FOLDER,
    Place,
    Users,
    choose_users,
    prepare_files,
    read_secrets,
    worker_registry_key,
    write_client_env,
)
from servers.starts import mirror_checkout, start_mlflow, start_prefect, start_worker
from tasks.logs import logger

log = logger("services")

COMPONENTS = ("worker", "prefect", "mlflow")
STOP_SECONDS = 20  # all three at once: within a minute in all, as Ctrl-C promises


def up(place: Place) -> int:
    """Start everything, then watch it until Ctrl-C (exit 130), make services-down (0) or a server's end (1)."""
    if not (BIN / "mlflow").exists():
        raise ServerFailed(f"no mlflow in {BIN}: ringflow services runs the servers of the environment ringflow is "
                           "installed in (make setup in a checkout; pip install of ringflow's pinned stack elsewhere)")
    postgres = Postgres(place)
    place.make_folders()
    users = choose_users(place)
    prepare_files(place, users)
    postgres.init_cluster()
    postgres.refuse_second_start()
    place.refuse_taken_ports()
    processes.stop_on_signals()
    processes.write_pid_file(os.getpid(), place.run / "services.pid")
    try:
        started(place, users, postgres)
    except Stop as stop:
        code = stop.code
    except Exception as failure:  # a server that did not start or ended, or a command that failed: all stopped
        print(f"error: {failure}", file=sys.stderr, flush=True)
        code = 1
    finally:
        processes.ignore_signals()  # a second Ctrl-C does not cut the stop short
    stop_all(place, postgres)
    log.info("stopped")
    return code


def started(place: Place, users: Users, postgres: Postgres) -> None:
    """The servers, the worker, the ready lines, then the watch (which ends only by an exception)."""
    secrets = read_secrets(place)
    postgres.start(secrets["DB_PASSWORD"])
    start_mlflow(place, users, secrets)
    start_prefect(place, users, secrets)
    write_client_env(place, secrets)
    repository, commit = mirror_checkout(place)
    start_worker(place, users, lambda: deploy_logged(place))
    print_ready(place, users, repository, commit)
    processes.watch({name: place.run / f"{name}.pid" for name in COMPONENTS}, place.logs)


def deploy_logged(place: Place) -> None:
    with os.fdopen(processes.open_file(place.logs / "deploy.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                   "w") as deploy_log:
        try:
            deploy(deploy_log)
        except RuntimeError as error:
            raise ServerFailed(f"prefect deploy failed; see {place.logs / 'deploy.log'}") from error


def stop_all(place: Place, postgres: Postgres) -> None:
    """The servers and the worker (Prefect's worker gets its second signal after 3 s), then PostgreSQL."""
    processes.stop_groups(STOP_SECONDS, [place.run / f"{name}.pid" for name in COMPONENTS], place.logs / "stop.log")
    postgres.stop()
    (place.run / "services.pid").unlink(missing_ok=True)
    for paused in place.run.glob("*.paused"):
        paused.unlink()


def print_ready(place: Place, users: Users, repository: str, commit: str) -> None:
    host = place.host
    print(f"MLflow:  http://{host}:{place.mlflow_port}  (PostgreSQL database mlflow on 127.0.0.1:{place.pg_port}; "
          f"artifacts in {place.artifacts})")
    print(f"Prefect: http://{host}:{place.prefect_port}  (PostgreSQL database prefect; work pool ringflow-local, "
          "a worker here)")
    print(f"remote pool ringflow-remote: commit {commit[:12]} of {repository}; on another host, with copies of "
          f"{place.home / 'client.env'} and {place.home / REMOTE_DEPLOYED_FILE} (what its worker checks each run "
          "against): scripts/remote_worker.sh CLIENT_ENV DEPLOYED")
    print(f"authentication is on (user {ROLE}); the credentials are in {place.home / 'client.env'} "
          "(mode 0600)")
    print(f"the servers run as {users.service}, the worker as {users.worker}; it signs the versions it registers "
          f"with {worker_registry_key(place.home / WORKER_FOLDER)} (a model server of another account needs a copy)")
    if place.on_network:
        print(f"warning: basic authentication over plain HTTP: anyone on the network path to {host} reads the "
              "password; put TLS in front (a reverse proxy, docs/team.md)")
    print(f"point a shell at them:  . {place.home / 'client.env'}")
    print(f"run:  {BIN / 'prefect'} deployment run 'training-pipeline/train' --param epochs=3 --watch")
    print(f"stop: Ctrl-C here, or from another shell {STOP_COMMAND}", flush=True)


def down(place: Place) -> int:
    """Stop the `up` of this SERVICES_HOME (it stops what it started), then whatever a killed one left."""
    postgres = Postgres(place)
    pid = processes.live_pid(place.run / "services.pid")
    if pid is not None and processes.send(signal.SIGTERM, pid, group=False):
        processes.wait_ended(pid, 90)
    stop_all(place, postgres)
    log.info("stopped")
    return 0


def pause(place: Place, name: str, kill: bool) -> int:
    """One server stopped (killed) while the rest runs on, for maintenance, or a crash to try."""
    pid_file = place.run / f"{name}.pid"
    if not pid_file.exists():
        raise ServerFailed(f"no {name} server of {place.home} is running")
    os.close(processes.open_file(place.run / f"{name}.paused", os.O_WRONLY | os.O_CREAT))
    if kill:
        if (pid := processes.live_pid(pid_file)) is not None:
            processes.send(signal.SIGKILL, pid)
        pid_file.unlink(missing_ok=True)
    else:
        processes.stop_groups(30, [pid_file], place.logs / "stop.log")
    log.info(f"{name} stopped")
    return 0


def resume(place: Place, name: str) -> int:
    """A paused server started again on the same data, ports and credentials."""
    if not (place.run / f"{name}.paused").exists():
        raise ServerFailed(f"the {name} server of {place.home} was not stopped with services.sh stop")
    users = choose_users(place)
    prepare_files(place, users)
    start = start_mlflow if name == "mlflow" else start_prefect
    start(place, users, read_secrets(place))
    (place.run / f"{name}.paused").unlink()
    log.info(f"{name} started")
    return 0
