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
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
