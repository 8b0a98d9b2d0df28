"""Hardening, as a user meets it, on test cluster g (ranks on g1 and g2), whole pipelines:
- no secret on a command line or in a log, with an AWS secret and a tracking URI holding a password in the
  environment, tracked by a real MLflow server that rank 0 reaches from its host. The hosts of the test cluster
  share this machine's process table, so one `ps` here sees every host's processes; it is sampled all through.
- `make run ARGS=... &` from an interactive shell on a terminal finishes (no ssh reads the terminal)."""
from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.remote.addresses import head_address
from tests.helpers import BIN, ROOT, api_call, free_port, make_workspace, quiet_env, run, wait_for_http, workspace_env
from tests.tasks.launch.cluster_hosts import cluster_up, hosts_of

pytestmark = pytest.mark.slow  # real hosts, sshd, an MLflow server, Prefect, whole pipelines
TEST_CLUSTER = "g"  # beside cluster h's modules (tests/parallel.py)
H1, H2 = hosts_of(TEST_CLUSTER)

AWS_SECRET = "aws-secret-2b7e151628aed2a6"
PASSWORD = "tracking-password-3c4fcf098815"
RUN_ID = re.compile(r"^mlflow run id:\s+(\w+)$", re.M)


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    yield from cluster_up(cluster=TEST_CLUSTER)


@pytest.fixture(scope="module")
def tracking_server(cluster: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow server on this machine's address on the hosts' network; its URI with a password in it (the
    server takes any)."""
    home, port = tmp_path_factory.mktemp("mlflow-server"), free_port()
    log = open(home / "server.log", "w")
    server = subprocess.Popen([str(BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{home / 'db'}",
                               "--artifacts-destination", str(home / "artifacts"), "--host", "0.0.0.0",
                               "--port", str(port), "--workers", "1"], env=quiet_env(), cwd=home, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, server)
        yield f"http://ringflow:{PASSWORD}@{head_address(cluster)}:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


class CommandLines:
    """Every process's command line (what `ps -eo args` shows, read from /proc: a `ps` ten times a second was a
    quarter of a core), sampled until stopped."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.seen.update(filter(None, map(command_line, Path("/proc").glob("[0-9]*/cmdline"))))
            self.samples += 1
            time.sleep(0.1)

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def command_line(path: Path) -> str:
    """A process's arguments joined by spaces, as ps shows them; empty when it has ended meanwhile."""
    try:
        return path.read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def prefect_log_messages(prefect_api: str) -> str:
    """Every log line the Prefect server holds."""
    messages, offset = [], 0
    while batch := api_call(prefect_api, "/logs/filter", {"limit": 200, "offset": offset}):
        messages += [entry["message"] for entry in batch]
        offset += len(batch)
    return "\n".join(messages)


def mlflow_run_text(tracking_uri: str, run_id: str, into: Path) -> str:
    """Everything MLflow holds of a run: params, tags, and the bytes of every artifact."""
    import mlflow
    from mlflow.tracking import MlflowClient
    data = MlflowClient(tracking_uri).get_run(run_id).data
    folder = mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(into), tracking_uri=tracking_uri)
    files = [path.read_bytes().decode(errors="replace") for path in Path(folder).rglob("*") if path.is_file()]
    return "\n".join([repr(data.params), repr(data.tags), *files])


def test_no_secret_reaches_a_command_line_or_a_log(cluster: list[str], tracking_server: str, prefect_api: str,
                                                   tmp_path: Path) -> None:
    """multiworker (ringflow's own ssh to each host; Horovod's: the next test)."""
    workspace = make_workspace(tmp_path / "workspace")
    env = workspace_env(workspace, PREFECT_API_URL=prefect_api, AWS_SECRET_ACCESS_KEY=AWS_SECRET,
                        MLFLOW_TRACKING_URI=tracking_server)
    overrides = [f"train.hosts={H1}:1,{H2}:1", "train.np=2", "train.epochs=3", "train.backend=multiworker"]
    with CommandLines() as command_lines:
        done = run([str(BIN / "python"), "-m", "flows.pipeline", *[f"--set={item}" for item in overrides]],
                   workspace, env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert_no_secret(command_lines, done.stdout + done.stderr, (tracking_server, prefect_api), tmp_path)


def assert_no_secret(command_lines: CommandLines, said: str, servers: tuple[str, str], tmp_path: Path) -> None:
    """No secret in the command lines seen while the 3-epoch run `said` ran, its output, the Prefect log, its
    MLflow run (servers: the tracking server's URI and Prefect's API)."""
    tracking_server, prefect_api = servers
    assert command_lines.samples > 50 and any("-m trainer" in line for line in command_lines.seen)
    run_id = RUN_ID.search(said)[1]  # type: ignore[index]
    from mlflow.tracking import MlflowClient
    history = MlflowClient(tracking_server).get_metric_history(run_id, "loss")
    assert len({metric.step for metric in history}) == 3  # rank 0 (first host) printed each epoch, the head logged it
    places = {"a command line": "\n".join(command_lines.seen), "the pipeline's output": said,
              "the Prefect log": prefect_log_messages(prefect_api),
              "the MLflow run": mlflow_run_text(tracking_server, run_id, tmp_path / "artifacts")}
    for place, text in places.items():
        for secret in (AWS_SECRET, PASSWORD):
            assert secret not in text, f"{secret} in {place}"


def interactive_shell(commands: str, env: dict[str, str], seconds: float) -> tuple[str, bool]:
    """What an interactive bash on a terminal prints for `commands` typed ahead (then `exit`), and whether it
    exited by itself: it is killed after `seconds` (a bound for a shell whose input someone else took, not a speed
    goal)."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: an interactive shell whose controlling terminal is the pty
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
    os.write(terminal, f"{commands}\nexit\n".encode())
    printed, deadline, exited = b"", time.monotonic() + seconds, False
    while not exited and time.monotonic() < deadline:
        exited = os.waitpid(pid, os.WNOHANG) != (0, 0)
        while select.select([terminal], [], [], 0 if exited else 1)[0]:
            try:
                printed += os.read(terminal, 65536)
            except OSError:  # the shell has gone and its terminal with it
                break
    if not exited:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return printed.decode(errors="replace"), exited


def test_a_run_started_in_the_background_of_a_terminal_finishes_and_shows_no_secret(
        cluster: list[str], tracking_server: str, prefect_api: str, tmp_path: Path) -> None:
    """`make run ARGS=... &` with hosts from the test cluster (Horovod over Gloo): the run finishes, what is typed
    after it reaches the shell (no ssh stopped by SIGTTIN, none reading the terminal), and no secret is shown."""
    workspace = make_workspace(tmp_path / "workspace")
    env = workspace_env(workspace, PREFECT_API_URL=prefect_api, TERM="dumb", AWS_SECRET_ACCESS_KEY=AWS_SECRET,
                        MLFLOW_TRACKING_URI=tracking_server)
    args = f"--set train.hosts={H1}:1,{H2}:1 --set train.np=2 --set train.epochs=3 --set train.controller=gloo"
    with CommandLines() as command_lines:
        printed, exited = interactive_shell(f"make -C {ROOT} run ARGS='{args}' > {tmp_path / 'run.log'} 2>&1 &\n"
                                            "wait $!; echo EXIT=$?\necho typed-after-$((40 + 2))", env, 600)
    log = (tmp_path / "run.log").read_text()
    assert "EXIT=0" in printed, printed[-1000:] + log[-3000:]
    assert "typed-after-42" in printed and exited, printed[-1000:]  # the shell, not ssh, read the lines typed
    assert "Stopped" not in printed and re.search(r"^test accuracy:", log, re.M), log[-3000:]
    assert_no_secret(command_lines, log, (tracking_server, prefect_api), tmp_path)
