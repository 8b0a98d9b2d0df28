"""end_now: a process that has done its work ends as a normal exit would, in its order, without waiting for ever:
a thread pool's idle workers (MLflow's artifact uploaders keep some) are told to end, non-daemon threads joined,
exit handlers run, output flushed."""
from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

PROGRAM = """
import atexit, threading, time
from concurrent.futures import ThreadPoolExecutor
from trainer.process_end import end_now
pool = ThreadPoolExecutor(2)  # left open, its workers idle: a normal exit ends them
pool.submit(print, "pooled work done", flush=True).result()
worker = threading.Thread(target=lambda: (time.sleep(0.3), print("worker done", flush=True)))  # not a daemon
worker.start()
atexit.register(lambda: print("exit handler ran"))
print("last line")
end_now(3)
"""


def test_a_process_with_an_idle_thread_pool_ends_at_once_after_its_handlers() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["pooled work done", "last line", "worker done", "exit handler ran"]
