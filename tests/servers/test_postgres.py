"""The services' PostgreSQL cluster, for real (Debian's PostgreSQL, run as its own user; the suite runs as root):
its superuser is reached only by PostgreSQL's user on the socket in its folder; the role the servers use owns the
databases and is no superuser (it runs no program as PostgreSQL's user); a cluster of an earlier version, whose
superuser that role was, is demoted at its next start; and a link PostgreSQL's user plants in its folder makes root
create or change nothing."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from servers.nofollow import own_folder
from servers.postgres import ADMIN, OLD_SUPERUSER, Postgres
from servers.processes import ServerFailed
from servers.setup import Place, write_secrets
from tests.conftest import Said
from tests.helpers import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL's own user: the suite runs as root")


@pytest.fixture
def place() -> Iterator[Place]:
    """A SERVICES_HOME PostgreSQL's user can reach (pytest's own folders are closed to other users), its secrets."""
    home = Path(tempfile.mkdtemp(prefix="ringflow-pg-", dir="/tmp"))
    home.chmod(0o711)
    made = Place(home=home, pg_port=free_port())
    for folder in (made.run, made.logs):
        folder.mkdir(mode=0o700)
    write_secrets(made)
    try:
        yield made
    finally:
        Postgres(made).stop()
        subprocess.run(["rm", "-rf", str(home)], check=False)


def as_role(place: Place, sql: str, database: str = "mlflow") -> subprocess.CompletedProcess:
    """SQL as the servers send it: the services' role over 127.0.0.1, with its password file."""
    psql = str(Postgres(place).bin / "psql")
    return subprocess.run([psql, "-X", "-h", "127.0.0.1", "-p", str(place.pg_port), "-U", "ringflow", "-d", database,
                           "-tAq", "-c", sql], env=dict(os.environ, PGPASSFILE=str(place.home / "pgpass")),
                          capture_output=True, text=True)


def password(place: Place) -> str:
    return dict(line.split("=", 1) for line in (place.home / "secrets.env").read_text().split())["DB_PASSWORD"]


def assert_no_superuser_reached(place: Place) -> None:
    assert as_role(place, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").stdout.strip() == "f"
    copied = as_role(place, "COPY (SELECT 1) TO PROGRAM 'id'")
    assert copied.returncode != 0 and "must be superuser or have privileges of the pg_execute_server_program" \
        in copied.stderr, copied.stderr  # (permission denied: SQLSTATE 42501)
    owners = as_role(place, "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname IN "
                            "('mlflow', 'mlflow_auth', 'prefect') ORDER BY 1").stdout.split()
    assert owners == ["mlflow|ringflow", "mlflow_auth|ringflow", "prefect|ringflow"]
    # Prefect's migrations create pg_trgm: a trusted extension, which the database's owner may create
    assert as_role(place, "CREATE EXTENSION IF NOT EXISTS pg_trgm", "prefect").returncode == 0
    for role in (ADMIN, OLD_SUPERUSER):  # the superusers answer no one on the network, with or without a password
        psql = str(Postgres(place).bin / "psql")
        done = subprocess.run([psql, "-X", "-h", "127.0.0.1", "-p", str(place.pg_port), "-U", role, "-d", "postgres",
                               "-w", "-c", "SELECT 1"], capture_output=True, text=True)
        assert done.returncode != 0 and "no pg_hba.conf entry" in done.stderr, done.stderr


def test_the_services_role_owns_the_databases_and_is_no_superuser(place: Place,
                                                                  said: Said) -> None:
    postgres = Postgres(place)
    postgres.init_cluster()
    postgres.start(password(place))
    assert_no_superuser_reached(place)
    assert postgres.admin("SELECT rolsuper FROM pg_roles WHERE rolname = current_user") == "t"
    postgres.stop()
    postgres.start(password(place))  # a second start finds it all there
    assert as_role(place, "SELECT 1").stdout.strip() == "1"
    assert said.lines("services") == [f"[services] creating the database cluster in {postgres.data} (PostgreSQL "
                                      f"runs as {postgres.user})"]


def test_a_cluster_whose_superuser_was_the_services_role_is_demoted_at_its_next_start(
        place: Place, said: Said) -> None:
    """Made as an earlier version made it (initdb -U ringflow, its password from the secrets), with a table, a
    serial column and an enum type of the servers' in mlflow and Prefect's extension in prefect."""
    postgres = Postgres(place)
    own_folder(postgres.folder, 0o700, int(subprocess.check_output(["id", "-u", postgres.user])))
    postgres.write_as_user(postgres.folder / "initdb-password", password(place) + "\n")
    made = postgres.tool("initdb", "-D", str(postgres.data), "-U", "ringflow",
                         f"--pwfile={postgres.folder / 'initdb-password'}", "--auth=scram-sha-256", "-E", "UTF8",
                         "--locale=C.UTF-8", capture_output=True, text=True, cwd="/")
    assert made.returncode == 0, made.stderr
    options = f"-p {place.pg_port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
    postgres.tool("pg_ctl", "start", "-D", str(postgres.data), "-w", "-l", str(postgres.folder / "server.log"), "-o",
                  options, check=True, stdout=subprocess.DEVNULL, cwd="/")
    for database in ("mlflow", "mlflow_auth", "prefect"):
        assert as_role(place, f"CREATE DATABASE {database}", "postgres").returncode == 0
    made = as_role(place, "CREATE TYPE stage AS ENUM ('a', 'b'); CREATE TABLE runs (id serial PRIMARY KEY, s stage)")
    assert made.returncode == 0 and as_role(place, "CREATE EXTENSION pg_trgm", "prefect").returncode == 0
    assert as_role(place, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").stdout.strip() == "t"
    postgres.stop()
    said.caplog.clear()
    postgres.init_cluster()
    postgres.start(password(place))
    assert said.lines("services") == [f"[services] the database role ringflow was the cluster's superuser (an "
                                      f"earlier version made it so): it becomes {OLD_SUPERUSER}, without login, and "
                                      "a new ringflow, no superuser, owns the databases"]
    assert_no_superuser_reached(place)
    assert as_role(place, "INSERT INTO runs (s) VALUES ('b') RETURNING id").stdout.strip() == "1"  # its own now
    assert as_role(place, "DROP TABLE runs; DROP TYPE stage").returncode == 0
    postgres.stop()
    postgres.start(password(place))  # and said once
    assert len(said.lines("services")) == 1


def test_a_link_planted_by_postgresql_s_user_makes_root_create_or_change_nothing(place: Place) -> None:
    """PostgreSQL's user (or whoever runs programs as it) plants `initdb-password -> a new file in a folder of
    root's alone` and removes its cluster's PG_VERSION: the next start as root makes the cluster again, and an
    earlier version created the target then, handed to that user. Now nothing is created, and the start stops in
    one line."""
    postgres = Postgres(place)
    postgres.init_cluster()
    roots = Path(tempfile.mkdtemp(prefix="ringflow-roots-"))  # mode 0700, root's
    target = roots / "ld.so.preload"
    try:
        as_postgres = ["runuser", "-u", postgres.user, "--"]
        subprocess.run([*as_postgres, "ln", "-s", str(target), str(postgres.folder / "initdb-password")], check=True)
        subprocess.run([*as_postgres, "rm", str(postgres.data / "PG_VERSION")], check=True)
        with pytest.raises(ServerFailed, match=r"^initdb failed; see "):
            postgres.init_cluster()
        assert not target.exists() and not target.is_symlink() and os.listdir(roots) == []
    finally:
        subprocess.run(["rm", "-rf", str(roots)], check=False)


def test_a_link_in_the_place_of_postgresql_s_folder_is_refused_and_what_it_leads_to_is_not_changed(
        place: Place) -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="ringflow-elsewhere-"))
    try:
        (place.home / "postgres").symlink_to(elsewhere)
        with pytest.raises(ServerFailed, match=rf"^{place.home}/postgres is a link: refused"):
            Postgres(place).init_cluster()
        assert (elsewhere.stat().st_uid, elsewhere.stat().st_mode & 0o777) == (0, 0o700)
    finally:
        elsewhere.rmdir()
