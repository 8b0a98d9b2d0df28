"""make serve: a Prefect server on 127.0.0.1 (its SQLite database under .prefect/), the local process work pool,
the deployments of prefect.yaml, a worker, and the model server of make serve-model (serving the registry's
champion: a scheduled retraining that promotes a new one is served within serving.poll_seconds). Ctrl-C stops them
all. PREFECT_PORT picks the Prefect port (4200), params.yaml's serving.port the model server's (8501).
Authentication is on, as make services has it (every local user reaches 127.0.0.1): a password made once into
.prefect/serve-secret (mode 0600); clients take it, with the API's address, from .prefect/client.env (mode 0600), and
the worker, which runs a flow run only if the pool and its deployment are the ones deployed here, from its
environment."""
from __future__ import annotations

import os
from pathlib import Path

from servers import processes
from servers.deploy import DEPLOYED_FILE, deploy, record_deployed, worker_command
from servers.local_prefect import port_is_free
from servers.processes import BIN, ServerFailed, Stop, ignore_signals, stop_on_signals
from servers.setup import ROLE, new_password, secret_file
from tasks.paths import ROOT


def serve() -> int:
    """The server, the deployments, a worker and the model server, until Ctrl-C (exit 130) or a TERM (0); the
    worker and the model server first, then the server, each given 30 s before it is killed."""
    port = int(os.environ.get("PREFECT_PORT", "4200"))
    if not port_is_free(port):  # another server there would answer the health check in this one's place
        raise ServerFailed(f"port {port} is taken (make stop stops this checkout's local Prefect server; "
                           "PREFECT_PORT=N make serve takes another port)")
    home = Path(os.environ.get("PREFECT_HOME") or ROOT / ".prefect")
    run_dir = home / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(PREFECT_HOME=str(home), PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
                      PREFECT_API_AUTH_STRING=auth_string(home))  # for deploy, the worker and its flow runs
    secret_file(home / "client.env", "".join(f"export {name}={os.environ[name]}\n"
                                             for name in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")))
    stop_on_signals()
    try:
        serving(port, home, run_dir)
    except Stop as stop:
        return stop.code
    finally:
        ignore_signals()
        processes.stop_groups(30, [run_dir / "worker.pid", run_dir / "model-server.pid"], home / "stop.log")
        processes.stop_groups(30, [run_dir / "server.pid"], home / "stop.log")
    return 0


def auth_string(home: Path) -> str:
    """`user:password` of the server's authentication, the password made once into HOME/serve-secret."""
    secret = home / "serve-secret"
    secret_file(secret)  # private, whatever mode it was given meanwhile
    password = secret.read_text().strip()
    if not password:
        password = new_password()
        secret_file(secret, password + "\n")
    return f"{ROLE}:{password}"


def serving(port: int, home: Path, run_dir: Path) -> None:
    """Start the server and wait for it, the model server, deploy, start the worker and watch them."""
    server_env = dict(os.environ, PREFECT_SERVER_API_AUTH_STRING=os.environ["PREFECT_API_AUTH_STRING"])
    processes.start("server", [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    run_dir, home, server_env, cwd=ROOT)
    processes.wait_http("Prefect", f"http://127.0.0.1:{port}/api/health", run_dir / "server.pid",
                        home / "server.log", seconds=120)
    processes.start("model-server", [str(BIN / "python"), "-m", "servers.model", "--wait-for-champion"], run_dir,
                    home, cwd=ROOT, terminal=True)  # serves the champion the deployments' runs promote
    deploy()
    record_deployed(run_dir)
    print(f"Prefect UI and API: http://127.0.0.1:{port}  (authentication is on, user {ROLE}: the credentials are in "
          f"{home / 'client.env'}, mode 0600)")
    print(f"point a shell at it:  . {home / 'client.env'}")
    print(f"run:  {BIN / 'prefect'} deployment run 'training-pipeline/train' --param epochs=3 --watch", flush=True)
    processes.start("worker", worker_command(run_dir / DEPLOYED_FILE), run_dir, home, cwd=ROOT,
                    terminal=True)  # its flow runs' lines in this terminal
    processes.watch({"worker": run_dir / "worker.pid", "server": run_dir / "server.pid",
                     "model-server": run_dir / "model-server.pid"}, home)
