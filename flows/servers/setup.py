"""What `make services` sets up before a server starts: where everything lives (SERVICES_HOME and the ports), who
runs what (an unprivileged service user when started by root), and the secrets, each made once and kept with the
data in files of mode 0600."""
from __future__ import annotations

import os
import pwd
import secrets as random_secrets
import socket
import string
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from flows.servers.processes import BIN, ServerFailed
from tasks.paths import ROOT

SECRET_NAMES = ("DB_PASSWORD", "MLFLOW_PASSWORD", "PREFECT_PASSWORD", "MLFLOW_SECRET_KEY")
ROLE = "ringflow"  # the database role, MLflow's admin user and Prefect's auth user


@dataclass(frozen=True)
class Place:
    """Where the services live and listen, from the environment (the defaults here)."""
    home: Path = field(default_factory=lambda: Path(os.path.realpath(os.environ.get("SERVICES_HOME")
                                                                      or ROOT / ".services")))
    host: str = field(default_factory=lambda: os.environ.get("SERVICES_HOST", "127.0.0.1"))
    mlflow_port: int = field(default_factory=lambda: int(os.environ.get("MLFLOW_PORT", "5000")))
    prefect_port: int = field(default_factory=lambda: int(os.environ.get("PREFECT_PORT", "4200")))
    pg_port: int = field(default_factory=lambda: int(os.environ.get("POSTGRES_PORT", "5433")))

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def artifacts(self) -> str:
        return os.environ.get("SERVICES_ARTIFACTS") or str(self.home / "mlflow-artifacts")

    @property
    def on_network(self) -> bool:
        return self.host not in ("127.0.0.1", "localhost")

    def make_folders(self) -> None:
        for folder, mode in ((self.home, 0o711), (self.run, 0o700), (self.logs, 0o700)):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(mode)

    def refuse_taken_ports(self) -> None:
        """Another server on a port would answer the health checks in its place (make run leaves the checkout's
        local Prefect server on 4200)."""
        for name, port in (("MLFLOW_PORT", self.mlflow_port), ("PREFECT_PORT", self.prefect_port),
                           ("POSTGRES_PORT", self.pg_port)):
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((self.host, port))
                except OSError:
                    raise ServerFailed(f"port {port} ({name}) is taken on {self.host}: {name}=N make services takes "
                                       "another (make stop stops this checkout's local Prefect server)") from None


@dataclass(frozen=True)
class Users:
    """Who runs the servers and who the worker, and the words that start a command as each."""
    service: str
    worker: str
    as_service: tuple[str, ...] = ()
    as_worker: tuple[str, ...] = ()

    @cached_property
    def worker_home(self) -> str:
        return pwd.getpwnam(self.worker).pw_dir


def as_root() -> bool:
    return os.geteuid() == 0


def system_user(name: str) -> str:
    """That system user, made when missing (two `up`s at once: the second finds it there)."""
    if not user_exists(name):
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True)
        if made.returncode != 0 and not user_exists(name):
            raise ServerFailed(f"could not make the system user {name}: {made.stderr.decode().strip()}")
    return name


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def choose_users(place: Place) -> Users:
    """As root: the servers as SERVICES_USER (ringflow-services), the worker as SERVICES_WORKER_USER (sudo's user,
    or root); otherwise all as this user. scripts/run_as.sh starts a command as another user with the Python this
    checkout's environment runs on, wherever it lies (pyenv's under /root, say)."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    if not as_root():
        return Users(me, me)
    service = system_user(os.environ.get("SERVICES_USER") or "ringflow-services")
    worker = os.environ.get("SERVICES_WORKER_USER") or os.environ.get("SUDO_USER") or "root"
    if not user_exists(worker):
        raise ServerFailed(f"SERVICES_WORKER_USER {worker} is no user of this machine")
    python_home = str(Path(os.path.realpath(BIN / "python")).parent.parent)
    run_as = str(ROOT / "scripts" / "run_as.sh")
    as_service = (run_as, service, python_home, str(ROOT / ".venv"), str(place.home), "--")
    as_worker = () if worker == "root" else (run_as, worker, python_home, str(ROOT), str(place.home), "--")
    return Users(service, worker, as_service, as_worker)


def secret_file(path: Path, text: str | None = None) -> None:
    """A file only its owner reads, created so (never readable by others, even briefly); a file made before with
    a looser mode is made private too. `text` replaces what it holds."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(descriptor)
    path.chmod(0o600)
    if text is not None:
        with open(path, "w") as file:
            file.write(text)


def new_password() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(random_secrets.choice(alphabet) for _ in range(32))


def read_secrets(place: Place) -> dict[str, str]:
    lines = (place.home / "secrets.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def write_secrets(place: Place) -> dict[str, str]:
    """The passwords (and the MLflow app's CSRF key), each made once; PostgreSQL's password file for libpq and
    asyncpg (PGPASSFILE); MLflow's auth configuration."""
    secrets_file = place.home / "secrets.env"
    secret_file(secrets_file)  # every start: private whatever mode it was given meanwhile
    known = read_secrets(place)
    missing = [name for name in SECRET_NAMES if name not in known]
    with open(secrets_file, "a") as file:
        file.writelines(f"{name}={new_password()}\n" for name in missing)
    known = read_secrets(place)
    secret_file(place.home / "pgpass", f"127.0.0.1:*:*:{ROLE}:{known['DB_PASSWORD']}\n")
    secret_file(place.home / "mlflow-auth.ini", mlflow_auth(place, known["MLFLOW_PASSWORD"]))
    return known


def mlflow_auth(place: Place, password: str) -> str:
    """MLflow's basic-auth app: a password checked once per worker and 5 minutes, not at each request (its hash
    costs 0.1-0.4 s of the server's CPU, and a run makes a few hundred requests; the password is 32 random
    characters: stretching adds nothing)."""
    return (f"[mlflow]\ndefault_permission = READ\n"
            f"database_uri = postgresql+psycopg2://{ROLE}@127.0.0.1:{place.pg_port}/mlflow_auth\n"
            f"admin_username = {ROLE}\nadmin_password = {password}\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
            "auth_cache_ttl_seconds = 300\n")


def prepare_files(place: Place, users: Users) -> None:
    """The secrets, then what the servers read and write: their user's own, of mode 0600 / 0700."""
    write_secrets(place)
    folders = [place.home / "prefect", place.home / "home"]
    if not os.environ.get("SERVICES_ARTIFACTS"):
        folders.append(place.home / "mlflow-artifacts")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
    if users.service == pwd.getpwuid(os.geteuid()).pw_name:
        return
    for private in ("pgpass", "mlflow-auth.ini"):
        os.chown(place.home / private, pwd.getpwnam(users.service).pw_uid, -1)
    for folder in folders:  # (data of an earlier version, made by root: once)
        if pwd.getpwuid(folder.stat().st_uid).pw_name != users.service:
            subprocess.run(["chown", "-R", f"{users.service}:", str(folder)], check=True)


def write_client_env(place: Place, secrets: dict[str, str]) -> None:
    """What a shell, a checkout or a worker needs to use the servers."""
    mlflow = f"http://{place.host}:{place.mlflow_port}"
    secret_file(place.home / "client.env", "".join(f"export {line}\n" for line in [
        f"MLFLOW_TRACKING_URI={mlflow}",
        f"RINGFLOW_CREDENTIALS_FOR={mlflow}",  # the credentials below go to no other server
        f"PREFECT_API_URL=http://{place.host}:{place.prefect_port}/api",
        f"MLFLOW_TRACKING_USERNAME={ROLE} MLFLOW_TRACKING_PASSWORD={secrets['MLFLOW_PASSWORD']}",
        f"PREFECT_API_AUTH_STRING={ROLE}:{secrets['PREFECT_PASSWORD']}"]))


def client_env(place: Place) -> dict[str, str]:
    """The variables client.env exports."""
    pairs = [word for line in (place.home / "client.env").read_text().splitlines() for word in line.split()[1:]]
    return dict(pair.split("=", 1) for pair in pairs)
