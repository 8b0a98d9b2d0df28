"""The prepared data's lock: runs read it together; prepare and restore change it alone, after the runs that use
it, saying for whom they wait; a holder that dies lets go."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from tasks.data.data_lock import holders, prepared_data_lock
from tasks.paths import ROOT

HOLD = """
import sys, time
from pathlib import Path
from tasks.data.data_lock import prepared_data_lock
with prepared_data_lock(False, sys.argv[2], lock_file=Path(sys.argv[1])) as holder:
    print("holding", flush=True)
    sys.stdin.read()  # until told to let go
"""


def holding(lock_file: Path, who: str) -> subprocess.Popen:
    """Another process holding the shared lock as `who`, until its input is closed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_file), who], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "holding\n"
    return process


def test_runs_read_the_data_together(tmp_path: Path) -> None:
    lock_file = tmp_path / "prepared-data.lock"
    run = holding(lock_file, "MLflow run first")
    lines: list[str] = []
    try:
        with prepared_data_lock(False, "MLflow run second", lines.append, lock_file):
            assert sorted(name.split(" (pid")[0] for name in holders(tmp_path / "prepared-data.holders")) == \
                ["MLflow run first", "MLflow run second"]
    finally:
        run.communicate("")
    assert lines == []


def test_a_change_waits_for_the_runs_and_says_which(tmp_path: Path) -> None:
    lock_file = tmp_path / "prepared-data.lock"
    run = holding(lock_file, "MLflow run abc")
    lines: list[str] = []
    changed = threading.Event()

    def restore() -> None:
        with prepared_data_lock(True, "restore of data version 1234", lines.append, lock_file):
            changed.set()
    changer = threading.Thread(target=restore)
    changer.start()
    try:
        while not lines:
            time.sleep(0.05)
        assert not changed.is_set()  # still waiting while the run holds the data
        assert lines == [f"restore of data version 1234: waiting for the prepared data, in use by MLflow run abc "
                         f"(pid {run.pid})"]
    finally:
        run.communicate("")
    changer.join(timeout=30)
    assert changed.is_set()


def test_a_holder_that_dies_lets_go_and_is_not_named(tmp_path: Path) -> None:
    lock_file = tmp_path / "prepared-data.lock"
    run = holding(lock_file, "MLflow run killed")
    run.kill()
    run.wait()
    assert holders(tmp_path / "prepared-data.holders") == []
    lines: list[str] = []
    with prepared_data_lock(True, "prepare", lines.append, lock_file):
        pass
    assert lines == []
