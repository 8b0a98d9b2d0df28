"""PostgreSQL for `make services`: Debian's, a database cluster of ringflow's own under SERVICES_HOME/postgres, run
as an unprivileged user (PostgreSQL refuses root: its `postgres` user, else one made for it) through its own tools
(initdb, pg_ctl, psql), listening on 127.0.0.1 only."""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path
from typing import Callable

from flows.servers.processes import ServerFailed
from flows.servers.setup import ROLE, Place, as_root, system_user, user_exists

DATABASES = ("mlflow", "mlflow_auth", "prefect")


def postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda path: float(path.parts[-3]))
    if not found:
        raise ServerFailed("PostgreSQL is not installed: run make setup")
    return found[-1].parent


class Postgres:
    """The services' database cluster."""

    def __init__(self, place: Place) -> None:
        self.place, self.bin = place, postgres_bin()
        self.folder, self.data = place.home / "postgres", place.home / "postgres" / "data"
        if not as_root():
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        else:
            self.user = "postgres" if user_exists("postgres") else system_user("ringflow-db")

    def as_user(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *command] if as_root() else command

    def tool(self, name: str, *arguments: str, **options: object) -> subprocess.CompletedProcess:
        return subprocess.run(self.as_user([str(self.bin / name), *arguments]), **options)  # type: ignore[call-overload]

    def init_cluster(self, password: str, say: Callable[[str], None]) -> None:
        """The cluster, made once (its role's password from the secrets, through a file its user alone reads)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chown(self.folder, pwd.getpwnam(self.user).pw_uid, -1)
        self.folder.chmod(0o700)
        if subprocess.run(self.as_user(["test", "-w", str(self.folder)])).returncode != 0:
            raise ServerFailed(f"PostgreSQL's user {self.user} cannot reach {self.place.home} (a folder on the way "
                               "is closed to it): set SERVICES_HOME")
        if (self.data / "PG_VERSION").exists():
            return
        say(f"creating the database cluster in {self.data} (PostgreSQL runs as {self.user})")
        password_file = self.folder / "initdb-password"
        descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(password + "\n")
        os.chown(password_file, pwd.getpwnam(self.user).pw_uid, -1)
        try:
            with open(self.place.logs / "initdb.log", "w") as log:
                made = self.tool("initdb", "-D", str(self.data), "-U", ROLE, f"--pwfile={password_file}",
                                 "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", stdout=log,
                                 stderr=subprocess.STDOUT)
        finally:
            password_file.unlink(missing_ok=True)
        if made.returncode != 0:
            raise ServerFailed(f"initdb failed; see {self.place.logs / 'initdb.log'}")

    def running(self) -> bool:
        return self.tool("pg_ctl", "status", "-D", str(self.data), capture_output=True).returncode == 0

    def refuse_second_start(self) -> None:
        if self.running():
            raise ServerFailed(f"the services of {self.place.home} are running already: make services-down stops "
                               "them")

    def start(self) -> None:
        """The server, then the databases it lacks."""
        options = f"-p {self.place.pg_port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
        started = self.tool("pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-l",
                            str(self.folder / "server.log"), "-o", options, stdout=subprocess.DEVNULL)
        if started.returncode != 0:
            raise ServerFailed(f"PostgreSQL did not start; see {self.folder / 'server.log'}")
        for database in DATABASES:
            if self.query("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{database}'") != "1":
                self.query("postgres", f"CREATE DATABASE {database}")

    def query(self, database: str, sql: str) -> str:
        done = subprocess.run([str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.place.pg_port), "-U", ROLE,
                               "-v", "ON_ERROR_STOP=1", "-tAq", "-d", database, "-c", sql],
                              env=dict(os.environ, PGPASSFILE=str(self.place.home / "pgpass")),
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.tool("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "20",
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
