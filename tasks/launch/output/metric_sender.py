"""Epoch metrics on their way to a tracking server that may be away a while (a restart): each epoch is in the spool
(trainer/metric_log) before it is queued, then sent from a background thread, in order, again and again until the
server takes it or has not answered for `retry_seconds`. Nothing waits for the server; what the spool holds that
the run lacks is logged when the job ends (tasks/tracking/metric_catchup)."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Callable

from trainer.metric_log import Spooled, append_to_spool

Send = Callable[[int, dict[str, float], int], None]  # epoch, metrics, timestamp (ms): a batch sent twice is identical


class BackgroundMetricLog:
    """`log(epoch, metrics)` spools and queues; a thread sends. After `retry_seconds` without the server taking
    anything it stops trying (one line on stderr) and the spool is all there is."""

    def __init__(self, send: Send, spool: Path, retry_seconds: float, first_pause: float = 1.0,
                 spooled_already: bool = False) -> None:
        self._send, self._spool, self._retry_seconds = send, spool, retry_seconds
        self._spooled_already = spooled_already  # the rank wrote each epoch to the spool before it printed it
        self._first_pause = first_pause
        self._pending: list[Spooled] = []
        self._lock = threading.Condition()
        self.gave_up = False
        self._thread = threading.Thread(target=self._run, name="metric-log", daemon=True)
        self._thread.start()

    def __call__(self, epoch: int, metrics: dict[str, float]) -> None:
        stamp = int(time.time() * 1000)
        if not self._spooled_already:
            append_to_spool(self._spool, epoch, metrics, stamp)
        with self._lock:
            self._pending.append((epoch, metrics, stamp))
            self._lock.notify_all()

    def _next(self) -> Spooled:
        with self._lock:
            while not self._pending:
                self._lock.wait()
            return self._pending[0]

    def _sent(self) -> None:
        with self._lock:
            self._pending.pop(0)
            self._lock.notify_all()

    def _run(self) -> None:
        failing_since: float | None = None
        pause = self._first_pause
        while True:
            epoch, metrics, stamp = self._next()
            try:
                self._send(epoch, metrics, stamp)
            except Exception as error:  # whatever the client raises for a server that is away
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since >= self._retry_seconds:
                    self._give_up(epoch, error)
                    return
                time.sleep(pause)
                pause = min(pause * 2, 10.0)
                continue
            failing_since, pause = None, self._first_pause
            self._sent()

    def _give_up(self, epoch: int, error: BaseException) -> None:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"metrics: the tracking server took nothing for {self._retry_seconds:.0f} s ({first_line[:200]}); "
              f"epochs from {epoch} on wait in {self._spool}", file=sys.stderr, flush=True)
        with self._lock:
            self.gave_up = True
            self._lock.notify_all()

    def close(self) -> int:
        """Wait until everything is sent or the thread gave up; how many epochs are still only in the spool."""
        with self._lock:
            while self._pending and not self.gave_up:
                self._lock.wait()
            return len(self._pending)
