"""PostgreSQL for `make services`: Debian's, a database cluster of ringflow's own under SERVICES_HOME/postgres, run
as an unprivileged user (PostgreSQL refuses root: its `postgres` user, else one made for it) through its own tools
(initdb, pg_ctl, psql), listening on 127.0.0.1 only. Its superuser (ADMIN) is reached only by that user, on the
socket in its folder; the services' role (ROLE) is no superuser: it owns the databases, which is all MLflow's and
Prefect's migrations need (Prefect's pg_trgm is a trusted extension, which a database's owner may create)."""
from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from pathlib import Path

from servers.nofollow import own_folder
from servers.processes import ServerFailed, open_file
from servers.setup import ROLE, STOP_COMMAND, Place, as_root, system_user, user_exists
from tasks.logs import logger

log = logger("services")

DATABASES = ("mlflow", "mlflow_auth", "prefect")
ADMIN = "ringflow_admin"  # the cluster's superuser: PostgreSQL's user alone reaches it, on the socket in its folder
OLD_SUPERUSER = "ringflow_bootstrap"  # what the superuser of an earlier version's cluster (named ROLE) becomes
ACCESS = f"""# written by ringflow (servers/postgres.py) at every start
# the superuser: PostgreSQL's own user, on the socket in its folder (mode 0700), as pg_ident.conf maps it
local all {ADMIN} peer map=admin
# the services' role, which owns the databases and is no superuser: on 127.0.0.1, by password
host all {ROLE} 127.0.0.1/32 scram-sha-256
"""
OUTSIDE_CATALOGS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
# what an earlier version's superuser made in a database (tables with their indexes and sequences, other sequences,
# enum types, functions) handed to the services' role; what belongs to an extension stays
HAND_OVER = f"""DO $$
DECLARE
  item record;
BEGIN
  FOR item IN SELECT c.oid::regclass AS name, c.relkind AS kind FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relowner = 10 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND {OUTSIDE_CATALOGS}
        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i', 'e'))
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO {ROLE}', CASE item.kind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                   item.name);
  END LOOP;
  FOR item IN SELECT t.oid::regtype AS name FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE t.typowner = 10 AND t.typtype = 'e' AND {OUTSIDE_CATALOGS}
        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = t.oid AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER TYPE %s OWNER TO {ROLE}', item.name);
  END LOOP;
  FOR item IN SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE p.proowner = 10 AND {OUTSIDE_CATALOGS}
        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO {ROLE}', item.name);
  END LOOP;
END $$"""


def postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda path: float(path.parts[-3]))
    if not found:
        raise ServerFailed("PostgreSQL is not installed: run make setup")
    return found[-1].parent


def last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


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

    def init_cluster(self) -> None:
        """The cluster, made once. Its superuser is ADMIN, which PostgreSQL's user alone reaches, through the socket
        in its folder (peer): no password of it exists, and root writes no file in that user's folder."""
        own_folder(self.folder, 0o700, pwd.getpwnam(self.user).pw_uid)
        if subprocess.run(self.as_user(["test", "-w", str(self.folder)])).returncode != 0:
            raise ServerFailed(f"PostgreSQL's user {self.user} cannot reach {self.place.home} (a folder on the way "
                               "is closed to it): set SERVICES_HOME")
        self.check_socket_path()
        if (self.data / "PG_VERSION").exists():
            return
        log.info(f"creating the database cluster in {self.data} (PostgreSQL runs as {self.user})")
        log_file = open_file(self.place.logs / "initdb.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(log_file, "w") as initdb_log:
            made = self.tool("initdb", "-D", str(self.data), "-U", ADMIN, "--auth-local=peer",
                             "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", stdout=initdb_log,
                             stderr=subprocess.STDOUT, cwd="/")
        if made.returncode != 0:
            raise ServerFailed(f"initdb failed; see {self.place.logs / 'initdb.log'}")

    def check_socket_path(self) -> None:
        """The socket's path fits a Unix socket's address (107 bytes), or one line says so before anything starts."""
        path = self.folder / f".s.PGSQL.{self.place.pg_port}"
        if len(os.fsencode(path)) > 107:
            raise ServerFailed(f"PostgreSQL's socket {path} would be longer than a Unix socket's 107 bytes: set "
                               "SERVICES_HOME to a shorter path")

    def running(self) -> bool:
        return self.tool("pg_ctl", "status", "-D", str(self.data), capture_output=True).returncode == 0

    def refuse_second_start(self) -> None:
        if self.running():
            raise ServerFailed(f"the services of {self.place.home} are running already: {STOP_COMMAND} stops "
                               "them")

    def start(self, password: str) -> None:
        """The server (its access rules written first), then the services' role (`password`; never a superuser)
        and the databases it owns."""
        self.write_as_user(self.data / "pg_hba.conf", ACCESS)
        self.write_as_user(self.data / "pg_ident.conf", f"admin {self.user} {ADMIN}\n")
        options = " ".join(["-p", str(self.place.pg_port), "-c", "listen_addresses=127.0.0.1", "-c",
                            shlex.quote(f"unix_socket_directories={self.folder}"), "-c",
                            "unix_socket_permissions=0700"])
        started = self.tool("pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-l",
                            str(self.folder / "server.log"), "-o", options, stdout=subprocess.DEVNULL, cwd="/")
        if started.returncode != 0:
            raise ServerFailed(f"PostgreSQL did not start; see {self.folder / 'server.log'}")
        self.reach_admin()
        self.demote_old_superuser()
        quoted = password.replace("'", "''")
        self.admin(f"SELECT 'CREATE ROLE {ROLE}' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}')"
                   f" \\gexec\nALTER ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                   f"PASSWORD '{quoted}'")
        for database in DATABASES:
            self.admin(f"SELECT 'CREATE DATABASE {database} OWNER {ROLE}' WHERE NOT EXISTS (SELECT FROM pg_database "
                       f"WHERE datname = '{database}') \\gexec\nALTER DATABASE {database} OWNER TO {ROLE}")

    def write_as_user(self, path: Path, text: str) -> None:
        """A file of PostgreSQL's folder, written as its user (root opens nothing in a folder another user writes)."""
        done = subprocess.run(self.as_user(["sh", "-c", 'umask 077 && cat > "$1"', "sh", str(path)]), input=text,
                              text=True, capture_output=True, cwd="/")
        if done.returncode != 0:
            raise ServerFailed(f"could not write {path} as {self.user}: {last_line(done.stderr)}")

    def admin(self, sql: str, database: str = "postgres") -> str:
        """SQL as the cluster's superuser, through the socket, as PostgreSQL's user; its output."""
        done = self.admin_run(sql, database)
        if done.returncode != 0:
            raise ServerFailed(f"PostgreSQL refused the services' set-up: {last_line(done.stderr)}")
        return done.stdout.strip()

    def admin_run(self, sql: str, database: str = "postgres") -> subprocess.CompletedProcess:
        return self.tool("psql", "-X", "-h", str(self.folder), "-p", str(self.place.pg_port), "-U", ADMIN, "-d",
                         database, "-v", "ON_ERROR_STOP=1", "-tAq", "-f", "-", input=sql, capture_output=True,
                         text=True, cwd="/")

    def reach_admin(self) -> None:
        """The superuser answers. A cluster of an earlier version has none yet: its superuser then, the services'
        role, makes it (once, over 127.0.0.1 with the services' password)."""
        done = self.admin_run("SELECT 1")
        if done.returncode == 0:
            return
        if f'role "{ADMIN}" does not exist' not in done.stderr:
            raise ServerFailed(f"PostgreSQL's superuser {ADMIN} cannot connect: {last_line(done.stderr)}")
        made = subprocess.run([str(self.bin / "psql"), "-X", "-h", "127.0.0.1", "-p", str(self.place.pg_port),
                               "-U", ROLE, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-tAq", "-f", "-"],
                              input=f"CREATE ROLE {ADMIN} SUPERUSER LOGIN", text=True, capture_output=True,
                              env=dict(os.environ, PGPASSFILE=str(self.place.home / "pgpass")))
        if made.returncode != 0:
            raise ServerFailed(f"the cluster in {self.data} has no superuser {ADMIN}, and {ROLE} could not make it: "
                               f"{last_line(made.stderr)}")

    def demote_old_superuser(self) -> None:
        """A cluster of an earlier version was made with the services' role as its superuser (anyone with its
        password ran programs as PostgreSQL's user): that role becomes OLD_SUPERUSER, without login or password,
        and the services' role, made anew, owns the databases and what they hold."""
        if self.admin("SELECT rolname FROM pg_roles WHERE oid = 10") == ROLE:
            log.info(f"the database role {ROLE} was the cluster's superuser (an earlier version made it so): it "
                     f"becomes {OLD_SUPERUSER}, without login, and a new {ROLE}, no superuser, owns the databases")
            self.admin(f"ALTER ROLE {ROLE} RENAME TO {OLD_SUPERUSER};\nALTER ROLE {OLD_SUPERUSER} NOLOGIN "
                       f"PASSWORD NULL;\nCREATE ROLE {ROLE} LOGIN")
        if self.admin("SELECT rolname FROM pg_roles WHERE oid = 10") != OLD_SUPERUSER:
            return
        for database in DATABASES:
            if self.admin(f"SELECT 1 FROM pg_database WHERE datname = '{database}'") == "1":
                self.admin(f"ALTER DATABASE {database} OWNER TO {ROLE}")
                self.admin(HAND_OVER, database)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.tool("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "20",
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
