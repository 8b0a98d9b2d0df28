"""What `make services` sets up before a server starts: where everything lives (SERVICES_HOME and the ports), who
runs what (an unprivileged service user when started by root), and the secrets, each made once and kept with the
data in files of mode 0600."""
from __future__ import annotations

import contextlib
import os
import pwd
import secrets as random_secrets
import shlex
import shutil
import socket
import stat
import string
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from servers.nofollow import own_folder
from servers.processes import BIN, ENVIRONMENT, ServerFailed, open_file
from tasks.paths import ROOT, code_repository
from tasks.tracking.registry_signature import KEY_ENV

SECRET_NAMES = ("DB_PASSWORD", "MLFLOW_PASSWORD", "PREFECT_PASSWORD", "MLFLOW_SECRET_KEY")
ROLE = "ringflow"  # the database role, MLflow's admin user and Prefect's auth user
WORKER_FOLDER = "worker"  # in SERVICES_HOME: the worker's own (its workspace, its home)
STOP_COMMAND = "ringflow services down (make services-down in ringflow's checkout)"  # from another shell
# the worker's workspace: the checkout's code and the user's model files (models/README.md)
WORKSPACE_LINKS = ("flows", "servers", "tasks", "trainer", "scripts", "models", "examples", ".venv")
WORKSPACE_COPIES = ("params.yaml", "dvc.yaml", ".dvc/config", ".dvc/.gitignore", ".dvcignore", ".gitignore",
                    "data/.gitignore")  # and its settings
RUN_AS = Path(__file__).with_name("run_as.sh")  # root starts a command as another user with it (run by bash)


@dataclass(frozen=True)
class Place:
    """Where the services live and listen, from the environment (the defaults here)."""
    home: Path = field(default_factory=lambda: Path(os.path.realpath(os.environ.get("SERVICES_HOME")
                                                                      or code_repository() / ".services")))
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
        """SERVICES_HOME (mode 0711) and its run/ and logs/ (0700), on a way no other user can change (as root)."""
        refuse_unsafe_home(self.home)
        self.home.mkdir(parents=True, exist_ok=True)
        refuse_unsafe_home(self.home)
        for folder, mode in ((self.home, 0o711), (self.run, 0o700), (self.logs, 0o700)):
            own_folder(folder, mode)

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
    """As root: the servers as SERVICES_USER (ringflow-services), the worker as SERVICES_WORKER_USER (ringflow-worker,
    made for it; never root), who may write nothing root runs; otherwise all as this user. servers/run_as.sh starts
    a command as another user with the Python this checkout's environment runs on, wherever it lies (pyenv's under
    /root, say)."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    # the worker's temporary files in its folder (Prefect's runner storage: /tmp/runner_storage may be root's); set
    # for the command only, not for servers/run_as.sh, whose own are root's
    temporary = ("env", f"TMPDIR={place.home / WORKER_FOLDER / 'tmp'}")
    if not as_root():
        return Users(me, me, as_worker=temporary)
    service = system_user(os.environ.get("SERVICES_USER") or "ringflow-services")
    worker = worker_user()
    python = [str(path) for path in python_paths()]
    run_as = ("bash", str(RUN_AS))
    as_service = (*run_as, service, *python, str(place.home), "--")
    as_worker = (*run_as, worker, *python, str(ROOT), str(place.home / WORKER_FOLDER), "--", *temporary)
    check_worker_rights(worker, place, (*run_as, worker, *python))
    return Users(service, worker, as_service, as_worker)


def python_paths() -> list[Path]:
    """What a command of this Python environment reads to start: the Python it runs on, the environment and every
    folder its imports come from (a .pth file may name one outside it); never the current folder."""
    imported = [Path(entry) for entry in sys.path[1:] if entry and Path(entry).is_dir()]
    return [Path(os.path.realpath(BIN / "python")).parent.parent, ENVIRONMENT, *imported]


def worker_user() -> str:
    """SERVICES_WORKER_USER, else a system user made for it: the worker runs what flow runs bring, never as root."""
    worker = os.environ.get("SERVICES_WORKER_USER")
    if not worker:
        return system_user("ringflow-worker")
    if not user_exists(worker):
        raise ServerFailed(f"SERVICES_WORKER_USER {worker} is no user of this machine")
    if pwd.getpwnam(worker).pw_uid == 0:
        raise ServerFailed(f"SERVICES_WORKER_USER {worker} has uid 0: the worker runs what flow runs bring, never "
                           "as root")
    return worker


def run_by_root(place: Place) -> list[Path]:
    """What root runs or reads to run at a start or a stop: this checkout (its programs, servers/run_as.sh, its git
    hooks and config), its environment and Python, the project whose deployments it makes (its prefect.yaml, its
    git hooks and config) and SERVICES_HOME (its pid files, the bare repository whose hooks `git push` runs);
    SERVICES_HOME/worker, the worker's own, aside."""
    return [ROOT, Path(os.path.realpath(ENVIRONMENT)), Path(os.path.realpath(BIN / "python")),
            Path(sysconfig.get_paths()["stdlib"]), *python_paths()[2:],
            *[code_repository()] * (code_repository() != ROOT), place.home]


def check_worker_rights(user: str, place: Place, as_user: tuple[str, ...]) -> None:
    """ServerFailed when `user` cannot read this checkout (the code it runs), or can write a path of run_by_root
    (the first one found), as it sees them: through the mount namespace servers/run_as.sh gives it."""
    paths = [str(path) for path in run_by_root(place)]
    code = shlex.quote(str(ROOT / "tasks" / "paths.py"))  # a file of the code, not just its folder: a folder of
    # the environment inside a closed checkout opens a view of the checkout that holds the environment alone
    script = (f'test -r {code} -a -x "$1" || echo unreadable; find "$@" -path '
              f'{shlex.quote(str(place.home / WORKER_FOLDER))} -prune -o -writable -print -quit 2>/dev/null; '
              'echo checked')
    done = subprocess.run([*as_user, *paths, "--", "sh", "-c", script, "sh", *paths], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    if lines[-1:] != ["checked"]:
        raise ServerFailed(f"could not check what the worker's user {user} can read and write: "
                           f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    if lines[0] == "unreadable":
        raise ServerFailed(f"the worker's user {user} cannot read ringflow's code in {ROOT}, which it runs: let it "
                           "read it (chmod go+rx; the folders on the way may stay closed)")
    if len(lines) > 1:
        raise ServerFailed(f"the worker's user {user} can write {lines[0]}, which root runs (or runs from) at every "
                           "make services: make it root's alone, or name another user in SERVICES_WORKER_USER")


def worker_folder(place: Place, users: Users) -> Path:
    """SERVICES_HOME/worker, the worker's own (mode 0700): made in root's folder and handed to the worker's user
    through a descriptor (nofollow.own_folder); never entered by root. One of another user is refused."""
    folder, owner = place.home / WORKER_FOLDER, pwd.getpwnam(users.worker).pw_uid
    with contextlib.suppress(FileNotFoundError):
        if (made_by := os.lstat(folder).st_uid) not in (os.geteuid(), owner):
            raise ServerFailed(f"{folder} belongs to {user_name(made_by)}, not to the worker's user {users.worker}: "
                               "remove it (it holds only the worker's workspace and home)")
    own_folder(folder, 0o700, owner)
    return folder


def worker_registry_key(folder: Path) -> Path:
    """The key the worker signs registered versions with (made at its first registration); a model server of
    another account serves them with a copy of it (tasks/tracking/registry_signature.py)."""
    return folder / "registry.key"


def worker_env(folder: Path) -> dict[str, str]:
    """The worker's environment beyond the services': its workspace (every flow run's outputs and run records) and
    its home (Prefect's, Keras's, DVC's, git's files) and the registry key it signs the versions it registers with in
    its folder (never a key named for root's processes). (Its temporary folder: Users.as_worker.)"""
    return {"RINGFLOW_WORKSPACE": str(folder / "workspace"), "HOME": str(folder / "home"),
            KEY_ENV: str(worker_registry_key(folder)), "PREFECT_HOME": str(folder / "home" / ".prefect")}


def trust_repositories(home: Path, repositories: list[str]) -> None:
    """git, as the worker's user, may read these repositories of root's (none writable by it: run_by_root): this
    checkout's (the code's commit, recorded with every run) and the bare one a project's deployments clone. In its
    global config, not the environment: a local clone's upload-pack gets no GIT_CONFIG_* variables."""
    config = ["git", "config", "--file", str(home / ".gitconfig")]
    subprocess.run([*config, "--unset-all", "safe.directory"], check=False)
    for repository in repositories:
        subprocess.run([*config, "--add", "safe.directory", repository], check=True)


def fill_worker_folder(folder: Path) -> None:
    """Run as the worker's user, at every start: its home, and its workspace (a checkout's shape when ringflow runs
    from its checkout, whose own deployments run there; empty for an installed ringflow, whose deployments are a
    project's and each run in a clone of its own)."""
    workspace = folder / "workspace"
    for made in (folder / "home", folder / "tmp", workspace):
        made.mkdir(parents=True, exist_ok=True)
    trust_repositories(folder / "home", [str(ROOT), os.environ["RINGFLOW_REPOSITORY"]])
    if (ROOT / "dvc.yaml").is_file():
        fill_checkout_workspace(workspace)


def fill_checkout_workspace(workspace: Path) -> None:
    """A DVC project of the checkout's shape whose code folders are links to the checkout's (read-only to the
    worker), whose settings are the checkout's as they are now, and whose run records (dvc.lock, the checkout's
    committed one at first) and git repository are its own."""
    for made in (workspace / ".dvc", workspace / "data"):
        made.mkdir(parents=True, exist_ok=True)
    for name in WORKSPACE_LINKS:
        (workspace / name).unlink(missing_ok=True)
        (workspace / name).symlink_to(ROOT / name)
    for name in WORKSPACE_COPIES:
        shutil.copyfile(ROOT / name, workspace / name)
    if not (workspace / "dvc.lock").exists():
        committed = subprocess.run(["git", "show", "HEAD:dvc.lock"], cwd=ROOT, capture_output=True)
        (workspace / "dvc.lock").write_bytes(committed.stdout if committed.returncode == 0
                                             else (ROOT / "dvc.lock").read_bytes())
    git = ["git", "-c", "user.name=ringflow-worker", "-c", "user.email=ringflow-worker@localhost"]
    for command in (["init", "-q"], ["add", "-A"]):
        subprocess.run([*git, *command], cwd=workspace, check=True)
    if subprocess.run([*git, "diff", "--cached", "--quiet"], cwd=workspace).returncode != 0:
        subprocess.run([*git, "commit", "-qm", "make services: the checkout's settings"], cwd=workspace, check=True)


def refuse_unsafe_home(home: Path) -> None:
    """As root: SERVICES_HOME and each folder on its way are root's (or this checkout's owner's, whose programs
    root runs) and writable by no other user (but a sticky one, /tmp: there no one moves another's folder); else
    another user could put a link on the way, and root would make, write and chown where it leads."""
    if not as_root():
        return
    trusted = {0, os.stat(ROOT).st_uid}
    for folder in [*reversed(home.parents), home]:
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            return  # made by root from here on
        writable = info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != 0)
        problem = ("is a link" if stat.S_ISLNK(info.st_mode) else "is not a folder" if not stat.S_ISDIR(info.st_mode)
                   else f"belongs to {user_name(info.st_uid)}" if info.st_uid not in trusted
                   else "is writable by other users" if writable and not info.st_mode & stat.S_ISVTX else None)
        if problem:
            raise ServerFailed(f"SERVICES_HOME {home}: {folder} {problem}, who could put a link on the way of what "
                               "root writes there: started by root, make services keeps its data where only root "
                               "changes the way (SERVICES_HOME=/var/lib/ringflow-services, say)")


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def secret_file(path: Path, text: str | None = None) -> None:
    """A file only its owner reads, created so (never readable by others, even briefly); a file made before with
    a looser mode is made private too. `text` replaces what it holds. A link in its place is refused."""
    with os.fdopen(open_file(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as file:
        os.fchmod(file.fileno(), 0o600)
        if text is not None:
            file.truncate(0)
            file.write(text)


def read_private(path: Path) -> str:
    """What a file of SERVICES_HOME holds (a link in its place refused)."""
    with os.fdopen(open_file(path, os.O_RDONLY)) as file:
        return file.read()


def new_password() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(random_secrets.choice(alphabet) for _ in range(32))


def read_secrets(place: Place) -> dict[str, str]:
    lines = read_private(place.home / "secrets.env").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def write_secrets(place: Place) -> dict[str, str]:
    """The passwords (and the MLflow app's CSRF key), each made once; PostgreSQL's password file for libpq and
    asyncpg (PGPASSFILE); MLflow's auth configuration."""
    secrets_file = place.home / "secrets.env"
    secret_file(secrets_file)  # every start: private whatever mode it was given meanwhile
    known = read_secrets(place)
    missing = [name for name in SECRET_NAMES if name not in known]
    with os.fdopen(open_file(secrets_file, os.O_WRONLY | os.O_APPEND), "a") as file:
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
    refuse_unsafe_home(place.home)  # (services.sh start comes here without make_folders)
    write_secrets(place)
    folders = [place.home / "prefect", place.home / "home"]
    if not os.environ.get("SERVICES_ARTIFACTS"):
        folders.append(place.home / "mlflow-artifacts")
    for folder in folders:
        own_folder(folder, 0o700)
    if users.service == pwd.getpwuid(os.geteuid()).pw_name:
        return
    for private in ("pgpass", "mlflow-auth.ini"):
        os.chown(place.home / private, pwd.getpwnam(users.service).pw_uid, -1, follow_symlinks=False)
    for folder in folders:  # (data of an earlier version, made by root: once; -P: no link followed)
        if pwd.getpwuid(folder.lstat().st_uid).pw_name != users.service:
            subprocess.run(["chown", "-R", "-P", f"{users.service}:", str(folder)], check=True)


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
    pairs = [word for line in read_private(place.home / "client.env").splitlines() for word in line.split()[1:]]
    return dict(pair.split("=", 1) for pair in pairs)


if __name__ == "__main__":  # python -m servers.setup FOLDER: run as the worker's user (starts.py: start_worker)
    fill_worker_folder(Path(sys.argv[1]))
