"""Evidently's venv (.venv-evidently beside .venv), made when first needed and again when its pins change
(scripts/evidently.txt): its own pandas 2.3 and what Evidently adds, then ringflow's stack through a .pth file (last
on its path). `python -m tasks.monitoring.evidently_env` makes it (scripts/setup.sh test does, for the tests)."""
from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tasks.logs import logger
from tasks.paths import ROOT

log = logger("monitor")
PINS = ROOT / "scripts" / "evidently.txt"
VENV = ROOT / ".venv-evidently"
STAMP = VENV / ".ringflow-setup"


def pins_digest() -> str:
    return hashlib.sha256(PINS.read_bytes()).hexdigest()[:16]


def site_packages(python: Path | str) -> str:
    """The pure-library folder of the interpreter `python`."""
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def evidently_python() -> Path:
    """The Evidently venv's interpreter, the venv made first when it is missing or its pins changed (one process at a
    time: the others wait for it)."""
    python = VENV / "bin" / "python"
    if STAMP.is_file() and STAMP.read_text() == pins_digest():
        return python
    with open(ROOT / ".venv-evidently.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (STAMP.is_file() and STAMP.read_text() == pins_digest()):
            make_venv(python)
    return python


def make_venv(python: Path) -> None:
    log.info(f"installing Evidently into {VENV} (once: scripts/evidently.txt)")
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    (Path(site_packages(python)) / "ringflow-stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(PINS)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()] or ["no output"]
        raise RuntimeError(f"installing Evidently (scripts/evidently.txt) failed: {said[-1]}")
    STAMP.write_text(pins_digest())


if __name__ == "__main__":
    from tasks import logs
    logs.setup()
    evidently_python()
