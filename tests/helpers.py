"""Shared test helpers: a private workspace or copy of the checkout, a real Prefect server, quiet environments."""
from __future__ import annotations

import atexit
import base64
import functools
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tasks.paths import WORKSPACE_ENV

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
BIN = Path(sys.executable).parent


def quiet_env(**extra: str) -> dict[str, str]:
    """The environment for child processes (the tf-keras switch is inherited): no telemetry, this interpreter's
    tools first."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1",
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("MLFLOW_RUN_ID", None)
    env.pop(WORKSPACE_ENV, None)
    env.update(extra)
    return env


RUN_RECORDS = ("dvc.lock",)  # what a user's runs rewrite in the working tree: tests take them as committed
CODE_LINKS = ("flows", "servers", "tasks", "trainer", "scripts", ".venv")  # a workspace's links to this checkout's code
WORKSPACE_FILES = ("params.yaml", "dvc.yaml", ".dvc/config", ".dvc/.gitignore", ".dvcignore", ".gitignore",
                   "data/.gitignore", "models/README.md")  # models/: the workspace's own model files


def committed(name: str, source: Path = ROOT) -> bytes:
    """A file as HEAD holds it (a user's run may have rewritten the working tree's copy)."""
    return subprocess.run(["git", "show", f"HEAD:{name}"], cwd=source, capture_output=True, check=True).stdout


def commit_all(repo: Path, message: str) -> None:
    for command in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-qm", message]):
        subprocess.run(command, cwd=repo, check=True)


def copy_checkout(target: Path, source: Path = ROOT, prepared: bool = True) -> Path:
    """The project's files (as git sees them, run records as committed) in a new git repo at target, sharing this
    .venv (and Evidently's): for tests that change or commit the code itself. `prepared`: as make_workspace's."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=source,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            if name in RUN_RECORDS:
                (target / name).write_bytes(committed(name, source))
            else:
                shutil.copy2(source / name, target / name)
    (target / ".venv").symlink_to(source / ".venv")
    (target / ".venv-evidently").symlink_to(source / ".venv-evidently")  # the monitor's (made by set-up)
    commit_all(target, "copy")
    if prepared:
        seed_prepared(target)
    return target


def make_workspace(target: Path, source: Path = ROOT, prepared: bool = True) -> Path:
    """A workspace at target (its own git repo, params.yaml, dvc.yaml and run records as committed, links to this
    checkout's code): run a pipeline in it with `workspace_env(target)`. `prepared`: with the built-in dataset
    already prepared and validated (seed_prepared)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in CODE_LINKS:
        (target / name).symlink_to(source / name)
    for name in WORKSPACE_FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target / name)
    for name in RUN_RECORDS:
        (target / name).write_bytes(committed(name, source))
    commit_all(target, "workspace")
    if prepared:
        seed_prepared(target)
    return target


@functools.cache
def prepared_digits() -> Path:
    """The built-in dataset as the checkout's params.yaml prepares it, validated (its stamp beside it), made once
    per test process in a folder removed at its exit."""
    from tasks.data.prepare import prepare
    from tasks.data.validate import validated
    from tasks.params import load_params
    home = Path(tempfile.mkdtemp(prefix="ringflow-test-digits-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    (home / "params.yaml").write_bytes(committed("params.yaml"))
    prepare(load_params(path=home / "params.yaml").data, home / "prepared", progress=False)
    validated(home / "prepared", home / "validated.json")
    return home


def make_project(target: Path, prepared: bool = True) -> Path:
    """A project of the user's own that `ringflow init` made at target, committed: run `ringflow` in it, or a
    pipeline with `workspace_env(target)`. `prepared`: as make_workspace's."""
    done = subprocess.run([str(BIN / "ringflow"), "init", str(target)], capture_output=True, text=True,
                          env=quiet_env())
    assert done.returncode == 0, done.stdout + done.stderr
    commit_all(target, "a ringflow project")
    if prepared:
        seed_prepared(target)
    return target


def seed_prepared(workspace: Path) -> None:
    """The workspace's data/prepared and its validation stamp as a first run would leave them (files and mtimes):
    its pipeline skips the conversion and the validation a first run pays (6 s; tests of their own, and the session's
    pipeline run, pay them)."""
    seed = prepared_digits()
    shutil.copytree(seed / "prepared", workspace / "data" / "prepared")
    (workspace / "outputs").mkdir(exist_ok=True)
    shutil.copy2(seed / "validated.json", workspace / "outputs" / "validated.json")


def workspace_env(workspace: Path, **extra: str) -> dict[str, str]:
    """quiet_env for processes that work in `workspace` (tasks/paths.py reads RINGFLOW_WORKSPACE)."""
    return quiet_env(RINGFLOW_WORKSPACE=str(workspace), **extra)


TEST_PORTS = range(20000, 32768)  # below the kernel's ephemeral ports (32768-60999), which any outgoing connection of
# another worker may take between a test's choice and its server's bind


def free_port() -> int:
    """A port no one listens on or connects from now, outside the ephemeral range, chosen at random."""
    for port in random.sample(TEST_PORTS, 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {TEST_PORTS}")


def wait_for_http(url: str, timeout: float, process: subprocess.Popen) -> None:
    """Poll url until it answers 200; fail early if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


# `python -m flows.pipeline ARGS` with an audit hook that creates the file RINGFLOW_TEST_IMPORT_MARK names when that
# process (not its children) imports TensorFlow
WATCHING_IMPORTS = """import os, runpy, sys
def mark(event, args):
    if event == "import" and args[0].split(".")[0] == "tensorflow":
        open(os.environ["RINGFLOW_TEST_IMPORT_MARK"], "w").close()
sys.addaudithook(mark)
runpy.run_module("flows.pipeline", run_name="__main__", alter_sys=True)
"""


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a command, capturing text output."""
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def api_call(api: str, path: str, body: Any = None, auth: str | None = None, method: str | None = None) -> Any:
    """JSON from the Prefect REST API (None for an empty answer): POST when body is given, else GET, unless `method`
    says otherwise; auth: a server's `user:password`."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    request = urllib.request.Request(f"{api}{path}", data=data, headers=headers,
                                     method=method or ("GET" if body is None else "POST"))
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = response.read()
    return json.loads(answer) if answer else None


def drawn_digit(digit: int) -> bytes:
    """A digit written with PIL's font on a 32x32 canvas, as PNG bytes (what a client of the model server sends)."""
    from PIL import Image, ImageDraw
    image = Image.new("L", (32, 32), 0)
    ImageDraw.Draw(image).text((8, 0), str(digit), fill=255, font_size=28, stroke_width=2, stroke_fill=255)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def read_split(data_dir: Path, split: str, rank: int = 0, size: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels) of one rank's part of a prepared split, as the input pipeline reads them."""
    from trainer.data import rank_dataset
    from trainer.prepared_data import read_manifest
    manifest = read_manifest(data_dir)
    images, labels = [], []
    for batch_images, batch_labels in rank_dataset(data_dir, manifest, split, rank=rank, size=size, batch_size=512):
        images.append(batch_images.numpy())
        labels.append(batch_labels.numpy())
    return np.concatenate(images), np.concatenate(labels)


def memory_cgroup_dir() -> Path:
    """This process's memory cgroup directory (cgroup v1 memory controller, or the unified v2 hierarchy)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    unified = Path("/sys/fs/cgroup")
    return unified / Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip().lstrip("/")


def memory_limited(command: list[str], limit_bytes: int, cwd: Path, env: dict[str, str],
                   timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a command in a new memory cgroup of `limit_bytes` (the kernel's OOM killer acts inside it only)."""
    group = memory_cgroup_dir() / f"ringflow-test-{os.getpid()}"
    group.mkdir()
    try:
        limit_file = "memory.limit_in_bytes" if (group / "memory.limit_in_bytes").exists() else "memory.max"
        (group / limit_file).write_text(str(limit_bytes))
        wrapped = ["sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh", *command]
        return run(wrapped, cwd, env, timeout)
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.2)


def numbered_data(folder: Path, count: int = 1000, min_shards: int = 8) -> Path:
    """Prepared data whose every training image says its own number (pixels 0 and 1: number mod 256, div 256)."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    images = np.zeros((count, 8, 8), np.uint8)
    images[:, 0, 0], images[:, 0, 1] = np.arange(count) % 256, np.arange(count) // 256
    np.savez(folder / "numbered.npz", x_train=images, y_train=np.zeros(count, np.int64),
             x_test=images[:20], y_test=np.zeros(20, np.int64))
    prepare(DataParams(dataset=f"npz:{folder / 'numbered.npz'}", min_shards=min_shards), folder / "prepared",
            progress=False)
    return folder / "prepared"


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll `condition` about twice a second for at most `seconds` (a bounded wait, not a speed goal)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()
