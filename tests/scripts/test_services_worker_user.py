"""`make services` started by root: the local pool's worker runs as an unprivileged user of its own (ringflow-worker,
made for it, or SERVICES_WORKER_USER; never root) in a workspace of its own (SERVICES_HOME/worker), and can write
nothing root runs at the next start or stop (the checkout, its programs, servers/run_as.sh and git's hooks, the
environment, SERVICES_HOME's run folder, the bare repository); a deployment run through it still completes. And it
runs only what was deployed: the work pool's base job template changed through the API, with the services'
credentials (.services/client.env), to a command of one's choosing runs nothing, and the next untouched deployment
run trains as before."""
from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tasks.tracking.registry_signature import KEY_ID_TAG, key_id
from tests.helpers import copy_checkout, free_port, quiet_env
from tests.scripts.services import Services, services_home, started_services, with_own_model
from tests.scripts.test_serve import TEMPLATE_REFUSED, template_changed_then_restored

pytestmark = pytest.mark.slow  # PostgreSQL, two servers, a worker, a deployment run

WORKER = "ringflow-worker"
TEAM_MODEL = "models/team_net.py:build"


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # the worker asks for work every second: the deployment run starts as soon as it is created
    # and the checkout's params.yaml names a model file of the team's own, in models/
    yield from started_services(tmp_path_factory.mktemp("worker-checkout"), prepare=team_model,
                                PREFECT_WORKER_QUERY_SECONDS="1")


def team_model(repo: Path) -> None:
    with_own_model(repo, TEAM_MODEL)


def worker_pid(services: Services) -> int:
    return int((services.home / "run" / "worker.pid").read_text().split()[0])


def as_the_worker_sees_it(services: Services, *command: str) -> subprocess.CompletedProcess:
    """A command as the worker's user, in the worker's own mount namespace (where servers/run_as.sh made the
    checkout and the environment reachable to it, whatever folder on the way is closed to that user)."""
    user = pwd.getpwnam(WORKER)
    return subprocess.run(["nsenter", "-t", str(worker_pid(services)), "-m", "--", "setpriv", "--reuid",
                           str(user.pw_uid), "--regid", str(user.pw_gid), "--init-groups", "--", *command],
                          capture_output=True, text=True)


def test_the_worker_runs_unprivileged_and_can_write_nothing_root_runs(services: Services) -> None:
    assert os.getuid() == 0  # (the suite runs as root, as CI does)
    group = worker_pid(services)
    uids = {process_uid(stat) for stat in Path("/proc").glob("[0-9]*/stat") if group_of(stat) == group}
    assert uids == {pwd.getpwnam(WORKER).pw_uid}
    venv_python = services.repo / ".venv" / "bin" / "python"
    bare = services.home / "ringflow.git"
    run_by_root = [venv_python, Path(os.path.realpath(venv_python)), services.repo / "servers" / "run_as.sh",
                   services.repo / "scripts" / "services.sh", services.repo / ".git" / "hooks",
                   services.repo / ".git" / "config", services.repo, bare / "hooks", bare / "config", bare,
                   services.home / "run", services.home]
    for path in run_by_root:
        assert path.exists(), path
        assert as_the_worker_sees_it(services, "test", "-w", str(path)).returncode != 0, path
    # nothing under the checkout, the environment, the run folder or the bare repository
    trees = [services.repo, Path(os.path.realpath(services.repo / ".venv")), services.home / "run", bare]
    found = as_the_worker_sees_it(services, "find", *map(str, trees), "-writable", "-print", "-quit")
    assert found.stdout == "", found.stdout  # (folders it may not even enter, root's of mode 0700, are said on stderr)
    assert all(line.endswith("Permission denied") for line in found.stderr.splitlines()), found.stderr
    # (what it may write: its own workspace; the checks above are not vacuous)
    workspace = services.home / "worker" / "workspace"
    assert as_the_worker_sees_it(services, "test", "-w", str(workspace)).returncode == 0
    assert pwd.getpwuid((services.home / "worker").stat().st_uid).pw_name == WORKER


def group_of(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[2])
    except OSError:  # gone while looking
        return None


def process_uid(stat: Path) -> int | None:
    try:
        return int(next(line.split()[1] for line in (stat.parent / "status").read_text().splitlines()
                        if line.startswith("Uid:")))
    except OSError:  # gone while looking
        return None


def ran_in_the_worker_s_workspace(services: Services) -> None:
    """The newest deployment run: its outputs in the worker's workspace, its own, nothing in the checkout, the
    checkout's commit recorded, its model signed with the worker's own registry key."""
    outputs = services.home / "worker" / "workspace" / "outputs"
    assert (outputs / "metrics.json").is_file()  # its outputs in its workspace, its own
    assert pwd.getpwuid((outputs / "metrics.json").stat().st_uid).pw_name == WORKER
    assert not (services.repo / "outputs").exists()  # nothing written into the checkout
    experiment = services.mlflow("experiments/get-by-name?experiment_name=ringflow")["experiment"]
    found = services.mlflow("runs/search", {"experiment_ids": [experiment["experiment_id"]], "max_results": 1,
                                            "order_by": ["attributes.start_time DESC"]})["runs"][0]
    params = {param["key"]: param["value"] for param in found["data"]["params"]}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=services.repo, capture_output=True, text=True)
    assert params["git_commit"] == head.stdout.strip()  # the checkout's code, read by git as the worker's user
    assert params["model.source"].startswith(f"{TEAM_MODEL}@")  # the team's model file reached the ranks
    key = services.home / "worker" / "registry.key"  # the worker signs with its own key, not one root's env named
    assert pwd.getpwuid(key.stat().st_uid).pw_name == WORKER and stat.S_IMODE(key.stat().st_mode) == 0o600
    run_id = found["info"]["run_id"]
    versions = services.mlflow(f"model-versions/search?filter=run_id%3D%27{run_id}%27")["model_versions"]
    tags = {tag["key"]: tag["value"] for tag in versions[0]["tags"]}
    assert tags[KEY_ID_TAG] == key_id(key.read_bytes().strip())


def test_a_pool_template_changed_through_the_api_runs_nothing_as_the_worker(services: Services) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ringflow-marker-", dir="/tmp"))
    folder.chmod(0o777)  # the worker's user could write the marker there, were the command run
    try:
        refused, trained = asyncio.run(template_changed_then_restored(services.client, folder / "ran", epochs=1,
                                                                      np=1))
        assert not (folder / "ran").exists()
    finally:
        shutil.rmtree(folder)
    assert refused.type.value == "CRASHED" and refused.message == TEMPLATE_REFUSED
    worker_log = (services.home / "logs" / "worker.log").read_text()
    assert len([line for line in worker_log.splitlines() if ") refused: " in line]) == 1
    assert trained.type.value == "COMPLETED", trained.message
    ran_in_the_worker_s_workspace(services)


def refused_start(checkout: Path, **settings: str) -> subprocess.CompletedProcess:
    """`up` of checkout with those settings, its Prefect port taken: it ends at the first refusal."""
    home = services_home()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        env = quiet_env(SERVICES_HOME=str(home), MLFLOW_PORT=str(free_port()),
                        PREFECT_PORT=str(taken.getsockname()[1]), POSTGRES_PORT=str(free_port()), **settings)
        try:
            return subprocess.run(["bash", "scripts/services.sh", "up"], cwd=checkout, capture_output=True, text=True,
                                  env=env, timeout=300)
        finally:
            subprocess.run(["rm", "-rf", str(home)], check=False)


def test_root_as_the_worker_s_user_is_refused(tmp_path: Path) -> None:
    done = refused_start(copy_checkout(tmp_path / "checkout"), SERVICES_WORKER_USER="root")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        "error: SERVICES_WORKER_USER root has uid 0: the worker runs what flow runs bring, never as root"), \
        done.stdout[-2000:] + done.stderr[-2000:]


def test_a_worker_s_user_who_can_write_what_root_runs_is_refused(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    checkout.chmod(0o755)
    os.chown(checkout / ".git" / "hooks", pwd.getpwnam("nobody").pw_uid, -1)  # git push runs them, as root
    done = refused_start(checkout, SERVICES_WORKER_USER="nobody")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        f"error: the worker's user nobody can write {checkout / '.git' / 'hooks'}, which root runs (or runs from) "
        "at every make services: make it root's alone, or name another user in SERVICES_WORKER_USER"), \
        done.stdout[-2000:] + done.stderr[-2000:]


def test_a_checkout_the_worker_s_user_cannot_read_is_refused(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    checkout.chmod(0o700)
    done = refused_start(checkout)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        f"error: the worker's user {WORKER} cannot read ringflow's code in {checkout}, which it runs: let it read it "
        "(chmod go+rx; the folders on the way may stay closed)"), done.stdout[-2000:] + done.stderr[-2000:]


def test_the_worker_s_folder_is_handed_over_never_through_a_link_nor_taken_from_another_user(tmp_path: Path) -> None:
    from servers.processes import ServerFailed
    from servers.setup import Place, Users, worker_folder
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    users = Users("ringflow-services", "nobody")
    assert worker_folder(Place(home=home), users) == home / "worker"  # made, and handed over
    assert (home / "worker").stat().st_uid == pwd.getpwnam("nobody").pw_uid
    assert (home / "worker").stat().st_mode & 0o777 == 0o700
    (home / "worker").rmdir()
    (home / "worker").symlink_to(elsewhere)
    with pytest.raises(ServerFailed, match=r"worker is a link: refused"):
        worker_folder(Place(home=home), users)
    assert elsewhere.stat().st_uid == 0  # what it leads to is not touched
    (home / "worker").unlink()
    (home / "worker").mkdir()
    os.chown(home / "worker", pwd.getpwnam("daemon").pw_uid, -1)  # another user's
    with pytest.raises(ServerFailed, match=r"worker belongs to daemon, not to the worker's user nobody: remove it"):
        worker_folder(Place(home=home), users)
