"""`make services` for real (scripts/services.sh in a copy of the checkout): PostgreSQL run as an unprivileged user,
the MLflow server and the Prefect server on it, the deployments and a worker. Two users' checkouts run the pipeline
against them; the MLflow server is killed for 30 s and the Prefect server restarted in the middle of a training;
a second start finds the data again."""
from __future__ import annotations

import os
import pwd
import re
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.helpers import BIN, ROOT, api_call, free_port, make_workspace, quiet_env, run, workspace_env
from tests.scripts.services import RUN_ID, Services, started_services

pytestmark = pytest.mark.slow  # PostgreSQL, two servers, a worker, whole pipelines
ONE_RANK = "--set=train.np=1"  # the servers are what these pipelines try: one rank reports as two would
OUTAGE_EPOCHS = 12  # the second user's: the servers go away after its epoch 2


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # started with SIGINT ignored, as a CI runner starts the suite: the harder case for Ctrl-C (see the last test)
    yield from started_services(tmp_path_factory.mktemp("services-checkout"), sigint_ignored=True)


def pipeline(services: Services, workspace: Path, *overrides: str) -> subprocess.CompletedProcess:
    return run([str(BIN / "python"), "-m", "flows.pipeline", ONE_RANK, *[f"--set={item}" for item in overrides]],
               workspace, services.user_env(workspace))


def test_on_loopback_too_the_servers_run_unprivileged_and_refuse_requests_without_credentials(
        services: Services) -> None:
    """Started by root, MLflow and Prefect (with every process they started) run as the service user, the worker as
    a user of its own (test_services_worker_user.py); every local user reaches 127.0.0.1, so neither server answers
    without credentials.
    (First in the module: the start of the services it looks at is this test's setup, not a pipeline test's.)"""
    assert os.getuid() == 0  # (the suite runs as root, as CI does)
    users = {path.stem: group_users(int(path.read_text().split()[0])) for path in (services.home / "run").glob("*.pid")
             if path.stem != "services"}
    assert users == {"mlflow": {"ringflow-services"}, "prefect": {"ringflow-services"}, "worker": {"ringflow-worker"}}
    mlflow_uri, prefect_api = services.client["MLFLOW_TRACKING_URI"], services.client["PREFECT_API_URL"]
    assert mlflow_uri.startswith("http://127.0.0.1:") and prefect_api.startswith("http://127.0.0.1:")
    search = f"{mlflow_uri}/api/2.0/mlflow/experiments/search"
    assert requests.post(search, json={"max_results": 1}, timeout=30).status_code == 401
    assert "experiments" in services.mlflow("experiments/search", {"max_results": 1})
    assert requests.post(f"{prefect_api}/flows/filter", json={}, timeout=30).status_code == 401
    user, password = services.client["PREFECT_API_AUTH_STRING"].split(":", 1)
    assert requests.post(f"{prefect_api}/flows/filter", json={}, auth=(user, password), timeout=30).ok
    database = requests.get(f"{prefect_api}/admin/settings", auth=(user, password), timeout=30).json()
    assert (database["server"]["database"]["connection_timeout"], database["server"]["database"]["timeout"]) == (
        30, 30)  # a start on a busy host waits for PostgreSQL
    # what the servers keep is theirs alone
    for name in ("prefect", "mlflow-artifacts", "pgpass", "mlflow-auth.ini"):
        assert pwd.getpwuid((services.home / name).stat().st_uid).pw_name == "ringflow-services", name
    # a worker checks the password once in a while, not at each of a run's few hundred requests (0.1-0.4 s of CPU each)
    assert auth_cache_seconds(services.home / "mlflow-auth.ini") >= 60
    # and MLflow runs no job runner (huey consumers) that ringflow would never ask
    commands = group_commands(int((services.home / "run" / "mlflow.pid").read_text().split()[0]))
    assert [command for command in commands if " server " in command]
    assert not [command for command in commands if "huey" in command]


def test_the_servers_database_role_owns_their_databases_and_runs_no_program(services: Services) -> None:
    """MLflow's and Prefect's migrations ran as the role the servers use, which owns the databases and is no
    superuser: with its password, no `COPY ... TO PROGRAM` runs a command as PostgreSQL's user."""
    assert services.psql("prefect", "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") == "f"
    assert services.psql("mlflow", "SELECT count(*) FROM alembic_version") == "1"  # MLflow's migrations ran
    assert services.psql("prefect", "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'") == "1"
    with pytest.raises(subprocess.CalledProcessError) as refused:
        services.psql("mlflow", "COPY (SELECT 1) TO PROGRAM 'id'")
    assert "must be superuser or have privileges of the pg_execute_server_program role" in refused.value.stderr


def experiment_id(services: Services) -> str:
    return services.mlflow("experiments/get-by-name?experiment_name=ringflow")["experiment"]["experiment_id"]


class Lines:
    """A pipeline's output, read as it comes; wait_for(pattern) blocks until a line matches."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.text, self._process = "", process
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with self._changed:
                self.text += line
                self._changed.notify_all()
        self._process.wait()  # its output ended: a waiter learns at once that no line will come
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 600) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: re.search(pattern, self.text, re.M) or self._process.poll()
                                          is not None, timeout), self.text[-2000:]
        assert re.search(pattern, self.text, re.M), self.text[-3000:]


def training(services: Services, workspace: Path, epochs: int, *flags: str) -> tuple[subprocess.Popen, Lines]:
    process = subprocess.Popen([str(BIN / "python"), "-m", "flows.pipeline", ONE_RANK, f"--set=train.epochs={epochs}",
                                *flags],
                               cwd=workspace, env=services.user_env(workspace), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    return process, Lines(process)


@dataclass
class TwoUsers:
    run_ids: dict[str, str]
    grace_said: str  # the second user's pipeline output


@pytest.fixture(scope="module")
def two_users(services: Services, tmp_path_factory: pytest.TempPathFactory) -> TwoUsers:
    """Two users' pipelines on the servers, one after the other, in checkouts of their own: ada's plain; grace's
    with both servers away while it trains (MLflow killed for 30 s, Prefect stopped for 10 s of them)."""
    folder = tmp_path_factory.mktemp("two-users")
    ada, grace = make_workspace(folder / "ada"), make_workspace(folder / "grace")
    done = pipeline(services, ada, "train.epochs=2")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    process, lines = training(services, grace, OUTAGE_EPOCHS)
    lines.wait_for(r"epoch 2: ")
    assert services.script("stop", "mlflow", "--kill").returncode == 0
    assert services.script("stop", "prefect").returncode == 0
    time.sleep(10)
    assert services.script("start", "prefect").returncode == 0
    time.sleep(20)
    assert services.script("start", "mlflow").returncode == 0
    assert process.wait(timeout=900) == 0, lines.text[-3000:]
    for workspace in (ada, grace):
        assert not (workspace / "mlruns" / "mlflow.db").exists()  # nothing tracked in the user's checkout
    return TwoUsers({"ada": RUN_ID.search(done.stdout)[1], "grace": RUN_ID.search(lines.text)[1]},  # type: ignore
                    lines.text)


def test_two_users_share_one_experiment_registry_and_gate(services: Services, two_users: TwoUsers) -> None:
    run_ids = two_users.run_ids
    experiment = services.mlflow("experiments/get-by-name?experiment_name=ringflow")["experiment"]
    found = services.mlflow("runs/search", {"experiment_ids": [experiment["experiment_id"]]})["runs"]
    assert {run["info"]["run_id"] for run in found} == set(run_ids.values())
    assert {run["info"]["status"] for run in found} == {"FINISHED"}
    versions = services.mlflow("model-versions/search?filter=name%3D%27ringflow%27")["model_versions"]
    assert sorted((version["version"], version["run_id"]) for version in versions) == \
        [("1", run_ids["ada"]), ("2", run_ids["grace"])]
    assert re.search(r"ringflow v2 (promoted to champion|kept as challenger): test accuracy \S+ vs champion v1 \S+ "
                     r"on the same test split", two_users.grace_said)
    in_postgres = services.psql("mlflow", "SELECT run_uuid FROM runs ORDER BY start_time").split()
    assert in_postgres == [run_ids["ada"], run_ids["grace"]]
    assert int(services.psql("prefect", "SELECT count(*) FROM flow_run WHERE state_type = 'COMPLETED'")) >= 2
    served = services.home / "mlflow-artifacts"
    assert len(list(served.glob("*/*/artifacts/savedmodel/saved_model.pb"))) == 2  # through the server's HTTP


def test_the_mlflow_server_killed_for_30_s_and_the_prefect_server_restarted_mid_run_lose_nothing(
        services: Services, two_users: TwoUsers) -> None:
    """Both servers away while the second user's run trains: the run finishes, each epoch's metrics logged once, and
    its flow run completes."""
    run_id = two_users.run_ids["grace"]
    assert services.mlflow(f"runs/get?run_id={run_id}")["run"]["info"]["status"] == "FINISHED"
    for key in ("loss", "val_accuracy", "images_per_sec"):
        assert logged_steps(services, run_id, key) == list(range(OUTAGE_EPOCHS)), key  # each once: none lost or twice
    api = services.client["PREFECT_API_URL"]
    flow_runs = api_call(api, "/flow_runs/filter", {"flow_runs": {"deployment_id": {"is_null_": True}},
                                                     "sort": "START_TIME_DESC", "limit": 1},  # not a scheduled one
                         auth=services.client["PREFECT_API_AUTH_STRING"])
    assert flow_runs[0]["state_type"] == "COMPLETED", flow_runs[0]["state"]


def test_copy_runs_moves_a_user_s_history_to_the_server_once(services: Services, tmp_path: Path) -> None:
    alone = make_workspace(tmp_path / "alone")
    done = run([str(BIN / "python"), "-m", "flows.pipeline", ONE_RANK, "--set=train.epochs=2"], alone,
               workspace_env(alone))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    local_run = RUN_ID.search(done.stdout)[1]  # type: ignore[index]
    copy = [str(BIN / "python"), "-m", "tasks", "copy-runs", "--to", services.client["MLFLOW_TRACKING_URI"]]
    # the server's credentials, as a user takes them from client.env (authentication is on, on loopback too)
    credentials = {name: services.client[name] for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                                                             "RINGFLOW_CREDENTIALS_FOR")}
    first, second = (run(copy, alone, workspace_env(alone, **credentials)) for _ in range(2))
    assert first.returncode == 0 and re.match(r"copied 1 runs and 1 model versions", first.stdout), first.stderr
    assert second.stdout.startswith("copied 0 runs and 0 model versions (1 runs and 1 versions were there already)")
    found = services.mlflow("runs/search", {"experiment_ids": [experiment_id(services)],
                                            "filter": f"tags.`ringflow.copied_from` = '{local_run}'"})["runs"]
    assert len(found) == 1
    copied = found[0]["info"]["run_id"]
    history = services.mlflow(f"metrics/get-history?run_id={copied}&metric_key=loss")["metrics"]
    assert sorted(metric["step"] for metric in history) == [0, 1]
    listed = services.mlflow(f"artifacts/list?run_id={copied}")["files"]
    assert {"model", "savedmodel", "evaluation"} <= {entry["path"] for entry in listed}


def logged_steps(services: Services, run_id: str, key: str) -> list[int]:
    """The steps a metric of the run was logged at, sorted (PostgreSQL's order is not theirs)."""
    history = services.mlflow(f"metrics/get-history?run_id={run_id}&metric_key={key}")["metrics"]
    return sorted(int(metric["step"]) for metric in history)


def test_a_tracking_server_away_longer_than_retry_minutes_stops_the_run_for_a_resume(services: Services,
                                                                                     tmp_path: Path) -> None:
    workspace, epochs = make_workspace(tmp_path / "workspace"), 6
    process, lines = training(services, workspace, epochs, "--set=tracking.retry_minutes=0.1")  # 6 s
    lines.wait_for(r"epoch 1: ")
    assert services.script("stop", "mlflow").returncode == 0
    try:
        lines.wait_for(r"^error: ")
        assert process.wait(timeout=300) == 1
    finally:
        assert services.script("start", "mlflow").returncode == 0
    last = lines.text.strip().splitlines()[-1]
    stopped = re.fullmatch(r"error: the tracking server http://\S+ did not answer within tracking.retry_minutes: "
                           r"run (\w+) stopped; its checkpoints are kept and --resume continues it once the server "
                           r"is back", last)
    assert stopped, lines.text[-3000:]
    resumed = run([str(BIN / "python"), "-m", "flows.pipeline", ONE_RANK, f"--set=train.epochs={epochs}", "--resume"],
                  workspace, services.user_env(workspace))
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert RUN_ID.search(resumed.stdout)[1] == stopped[1]  # type: ignore[index]
    assert services.mlflow(f"runs/get?run_id={stopped[1]}")["run"]["info"]["status"] == "FINISHED"
    assert logged_steps(services, stopped[1], "val_accuracy") == list(range(epochs))


def test_ctrl_c_stops_every_service_and_a_second_start_finds_the_data(services: Services) -> None:
    # `up` started with SIGINT ignored (a CI runner's way, or make's in a background job): bash cannot trap an ignored
    # SIGINT, so Ctrl-C reaches the stop only because `up` runs itself again with SIGINT's default action
    assert services.sigint_ignored
    before = services.psql("mlflow", "SELECT count(*) FROM runs")
    groups = [int(path.read_text().split()[0]) for path in (services.home / "run").glob("*.pid")
              if path.stem != "services"]
    postgres = int((services.home / "postgres" / "data" / "postmaster.pid").read_text().split()[0])
    assert len(groups) == 3
    started = time.monotonic()
    assert services.interrupt(timeout=60) == 130  # in a minute, as make services-down
    assert time.monotonic() - started < 60
    assert not [group for group in groups if alive(-group)]  # both servers and the worker, with their children
    # the worker (it has seen flow runs by now) ends on Prefect's own second signal, not killed at the deadline
    assert "worker: killed" not in (services.home / "logs" / "stop.log").read_text()
    assert not alive(postgres) and not (services.home / "postgres" / "data" / "postmaster.pid").exists()
    private_files = ("secrets.env", "client.env", "pgpass", "mlflow-auth.ini")
    for private in private_files:  # loosened meanwhile, by anyone
        (services.home / private).chmod(0o644)
    services.start()
    assert services.psql("mlflow", "SELECT count(*) FROM runs") == before
    for private in private_files:
        assert stat_mode(services.home / private) == 0o600, private  # made private again by the start
    for folder in ("logs", "run", "mlflow-artifacts"):
        assert stat_mode(services.home / folder) == 0o700, folder


def auth_cache_seconds(config: Path) -> int:
    """How long the MLflow server's workers keep a checked password, as MLflow reads its auth config."""
    read = "from mlflow.server.auth.config import read_auth_config; print(read_auth_config().auth_cache_ttl_seconds)"
    done = subprocess.run([str(BIN / "python"), "-c", read], env=dict(os.environ, MLFLOW_AUTH_CONFIG_PATH=str(config)),
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def group_users(group: int) -> set[str]:
    """The users that the processes of a process group run as."""
    users = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = (status.parent / "stat").read_text().rsplit(")", 1)[1].split()
            uid = next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("Uid:"))
        except OSError:  # gone while looking
            continue
        if int(fields[2]) == group:
            users.add(pwd.getpwuid(int(uid)).pw_name)
    return users


def group_commands(group: int) -> list[str]:
    """The command lines of the processes of a process group."""
    commands = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == group:
                commands.append((stat.parent / "cmdline").read_text().replace("\0", " "))
        except OSError:  # gone while looking
            continue
    return commands


def test_down_signals_no_process_that_is_not_its_own(tmp_path: Path) -> None:
    """Pid files left from before a reboot (or of the old format, a bare pid) that now name another process
    group: `down` removes them and signals nothing."""
    run_dir = tmp_path / "services" / "run"
    run_dir.mkdir(parents=True)
    (tmp_path / "services" / "logs").mkdir()
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)
    # a server that an earlier version started (in a session of its own, not this test's child) and noted by its
    # bare pid: it runs this checkout's programs
    started = subprocess.run(["setsid", "-f", "sh", "-c", f'echo $$; exec {BIN / "python"} -c "import time; '
                              'time.sleep(600)" >/dev/null 2>&1 </dev/null'],
                             capture_output=True, text=True, check=True)
    ours = int(started.stdout.split()[0])
    try:
        for name in ("services", "mlflow", "prefect"):
            (run_dir / f"{name}.pid").write_text(f"{bystander.pid}\n")
        (run_dir / "mlflow.pid").write_text(f"{bystander.pid} 1\n")  # the pid, another process's start time
        (run_dir / "worker.pid").write_text(f"{ours}\n")
        done = subprocess.run(["bash", "scripts/services.sh", "down"], cwd=ROOT, capture_output=True, text=True,
                              env=quiet_env(SERVICES_HOME=str(tmp_path / "services")), timeout=120)
        assert done.returncode == 0, done.stderr
        assert bystander.poll() is None and not list(run_dir.glob("*.pid"))
        assert not alive(ours)  # stopped
    finally:
        bystander.kill()
        bystander.wait()
        subprocess.run(["kill", "-KILL", str(ours)], capture_output=True)


def test_a_taken_port_is_one_line_before_any_server_starts() -> None:
    """Another server on the Prefect port (`make run` leaves the checkout's local one on 4200) would answer the
    services' health check in their Prefect's place: `up` refuses the port in one last line and starts nothing."""
    from tests.scripts.services import services_home
    home = services_home()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = quiet_env(SERVICES_HOME=str(home), MLFLOW_PORT=str(free_port()), PREFECT_PORT=str(port),
                        POSTGRES_PORT=str(free_port()))
        try:
            done = subprocess.run(["bash", "scripts/services.sh", "up"], cwd=ROOT, capture_output=True, text=True,
                                  env=env, timeout=300)
        finally:
            subprocess.run(["rm", "-rf", str(home)], check=False)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        f"error: port {port} (PREFECT_PORT) is taken on 127.0.0.1: PREFECT_PORT=N make services takes another (make "
        "stop stops this checkout's local Prefect server)"), done.stdout[-2000:] + done.stderr[-2000:]
    assert "stop: Ctrl-C here" not in done.stdout


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def alive(pid: int) -> bool:
    """Whether a process (or, negative, any process of a group) is still there; a zombie left to init is not."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone while looking
            continue
        state, group = fields[0], int(fields[2])
        if state != "Z" and (int(stat.parent.name) == pid if pid > 0 else group == -pid):
            return True
    return False
