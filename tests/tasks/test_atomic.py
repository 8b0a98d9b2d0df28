"""Locks between processes: held while the holder lives, free when it is gone (however it ended)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tasks.atomic import file_lock, lock_held


def test_a_lock_is_held_while_its_process_lives_and_free_after(tmp_path: Path) -> None:
    lock = tmp_path / "training.lock"
    assert not lock_held(lock)
    code = ("import sys, time\nfrom tasks.atomic import file_lock\nfrom pathlib import Path\n"
            "with file_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    assert holder.stdout.readline().strip() == "held"
    assert lock_held(lock)
    holder.kill()
    holder.wait()
    assert not lock_held(lock)
    with file_lock(lock):
        pass
