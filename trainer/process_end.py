"""Ending a process that has done its work, without the interpreter's teardown of TensorFlow (1.5-2.5 s of a
process that imported it, every rank and every pipeline): what a normal exit does that matters (its threads
finished, its exit handlers run: a heartbeat's end line, a metric log's last sends, Horovod's and Prefect's
shutdown, the output flushed), then the end."""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def end_now(code: int = 0) -> NoReturn:
    """Exit as the interpreter would, in its order, then stop: threading's exit hooks (they tell idle thread-pool
    workers, MLflow's artifact uploaders among them, to end) and every non-daemon thread joined (what
    threading._shutdown does first at exit; joining them without the hooks waited for ever), then atexit."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
