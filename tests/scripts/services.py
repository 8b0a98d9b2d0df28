"""`make services` (scripts/services.sh) for tests: started in a copy of the checkout (or `ringflow services` in a
project of the user's own) with its data in a folder of its own, stopped, asked through psql; a user's shell pointed
at it."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from servers.setup import STOP_COMMAND
from tests.helpers import BIN, ROOT, commit_all, copy_checkout, free_port, quiet_env, run, workspace_env

RUN_ID = re.compile(r"^mlflow run id:\s+(\w+)$", re.M)
READY_LINE = f"stop: Ctrl-C here, or from another shell {STOP_COMMAND}"


def read_client_env(path: Path) -> dict[str, str]:
    """The variables `. .services/client.env` exports."""
    pairs = [word for line in path.read_text().splitlines() for word in shlex.split(line)[1:]]
    return dict(pair.split("=", 1) for pair in pairs)


@dataclass
class Services:
    repo: Path
    home: Path
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None
    client: dict[str, str] = field(default_factory=dict)
    sigint_ignored: bool = False  # `up` started as a CI runner (or make in a background job) starts it: SIGINT ignored
    command: tuple[str, ...] = ("bash", "scripts/services.sh")  # in a project: ringflow services

    def script(self, *args: str) -> subprocess.CompletedProcess:
        return run([*self.command, *args], self.repo, self.env, timeout=300)

    def start(self) -> None:
        """`up`, until it says it is ready (in what it printed this time: the log keeps earlier starts)."""
        before = len(self.log.read_text()) if self.log.exists() else 0
        ignoring = ["env", "--ignore-signal=INT"] if self.sigint_ignored else []
        self.process = subprocess.Popen([*ignoring, *self.command, "up"], cwd=self.repo, env=self.env,
                                        stdout=open(self.log, "a"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        while READY_LINE not in self.log.read_text()[before:]:
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(1)
        self.client = read_client_env(self.home / "client.env")

    def interrupt(self, timeout: float = 180) -> int:
        """Ctrl-C, as in the terminal of `make services`; its exit status."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def psql(self, database: str, query: str) -> str:
        command = [*self.postgres_bin("psql"), "-h", "127.0.0.1", "-p", self.env["POSTGRES_PORT"], "-U", "ringflow",
                   "-d", database, "-tAc", query]
        done = subprocess.run(command, env=dict(os.environ, PGPASSFILE=str(self.home / "pgpass")),
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    @staticmethod
    def postgres_bin(name: str) -> list[str]:
        return [str(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))[-1])]

    def mlflow(self, path: str, body: dict | None = None, credentials: bool = True) -> Any:
        """MLflow's REST API as a user's shell reaches it (with its credentials, when authentication is on)."""
        import requests
        url = f"{self.client['MLFLOW_TRACKING_URI']}/api/2.0/mlflow/{path}"
        user = self.client.get("MLFLOW_TRACKING_USERNAME")
        auth = (user, self.client["MLFLOW_TRACKING_PASSWORD"]) if user and credentials else None
        answer = requests.request("POST" if body is not None else "GET", url, json=body, auth=auth, timeout=30)
        answer.raise_for_status()
        return answer.json()

    def user_env(self, workspace: Path, **extra: str) -> dict[str, str]:
        """A user's shell pointed at the services (`. .services/client.env`), working in `workspace`."""
        return workspace_env(workspace, **self.client, **extra)


def services_home() -> Path:
    """A folder PostgreSQL's unprivileged user can reach (pytest's own are closed to other users)."""
    home = Path(tempfile.mkdtemp(prefix="ringflow-services-", dir="/tmp"))
    home.chmod(0o711)
    return home


OWN_MODEL = "examples/own-image-model/model.py:build"  # a subclassed Keras model with its own train_step


def with_own_model(repo: Path, model: str = OWN_MODEL) -> None:
    """The repository's params.yaml trains a model of the team's own: `model`, examples/own-image-model's model
    (copied to the file `model` names when the repository has none there)."""
    path = repo / model.split(":")[0]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / OWN_MODEL.split(":")[0], path)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["train"].update(model=model, model_args={"filters": 4, "units": 16})
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def started_services(checkout: Path, *, sigint_ignored: bool = False, prepare: Callable[[Path], None] | None = None,
                     **settings: str) -> Iterator[Services]:
    """scripts/services.sh up in a copy of the checkout made in `checkout` (changed by `prepare` and committed, so
    the deployments are of that commit), on free ports (with SIGINT ignored, when told); afterwards down and its
    data removed."""
    repo = copy_checkout(checkout, prepared=False)  # what the worker runs prepares its own
    if prepare:
        prepare(repo)
        commit_all(repo, "prepared")
    repo.chmod(0o755)  # the worker's user reads the code it runs (pytest's folders on the way stay closed)
    yield from services_in(Services(repo, services_home(), {}, repo.parent / "services.log",
                                    sigint_ignored=sigint_ignored), settings)


def project_services(folder: Path, *, prepare: Callable[[Path], None], installed: Path = BIN,
                     **settings: str) -> Iterator[Services]:
    """`ringflow services` of the environment whose bin/ is `installed` in a project its `ringflow init` made in
    `folder` (changed by `prepare` and committed: its deployments clone that commit); afterwards down and its data
    removed. The worker's user reads nothing of it."""
    done = run([str(installed / "ringflow"), "init", str(folder)], folder.parent, quiet_env())
    assert done.returncode == 0, done.stdout + done.stderr
    prepare(folder)
    commit_all(folder, "a team's project")
    yield from services_in(Services(folder, services_home(), {}, folder.parent / "services.log",
                                    command=(str(installed / "ringflow"), "services")), settings)


def services_in(services: Services, settings: dict[str, str]) -> Iterator[Services]:
    """`services` (their home made) started in their repository on free ports; afterwards down and their data
    removed."""
    services.env = quiet_env(SERVICES_HOME=str(services.home), MLFLOW_PORT=str(free_port()),
                             PREFECT_PORT=str(free_port()), POSTGRES_PORT=str(free_port()),
                             PREFECT_HOME=str(services.repo / ".prefect"), **settings)
    services.env.pop("PREFECT_API_URL", None)
    try:
        services.start()
        yield services
    finally:
        services.script("down")
        subprocess.run(["rm", "-rf", str(services.home)], check=False)
