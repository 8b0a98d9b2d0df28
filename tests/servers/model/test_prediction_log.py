"""The prediction log without a server: its sample (serving.log_fraction, at most serving.log_max_per_second), a
full queue dropping and counting instead of waiting, and every item offered either written or counted."""
from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from servers.model import prediction_log
from servers.model.prediction_log import PredictionLog, Served


def items(count: int) -> list[Served]:
    return [Served(time.time(), "r", "1", index, np.arange(3, dtype=np.float32), "", 0.5, "", 1.0)
            for index in range(count)]


def written_rows(folder: Path) -> list[dict[str, Any]]:
    return [row for part in sorted(folder.glob("*/part-*.parquet")) for row in pq.read_table(part).to_pylist()]


def test_a_fraction_of_the_items_is_logged_and_no_more_than_the_rate(tmp_path: Path) -> None:
    random.seed(7)
    sampled = PredictionLog(tmp_path / "half", 0.5, 10_000)
    sampled.offer(items(1000), tensor=True)
    sampled.close()
    assert 400 < len(written_rows(tmp_path / "half")) < 600
    limited = PredictionLog(tmp_path / "limited", 1.0, 10)
    limited.offer(items(100), tensor=True)
    limited.close()
    rows = written_rows(tmp_path / "limited")
    assert len(rows) == 10 and rows[0]["values"] == [0.0, 1.0, 2.0] and rows[0]["kind"] == "tensor"


def test_a_full_queue_drops_and_counts_without_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release, summarize = threading.Event(), prediction_log.row
    monkeypatch.setattr(prediction_log, "QUEUE_ITEMS", 2)
    monkeypatch.setattr(prediction_log, "row", lambda *given: release.wait(30) and summarize(*given))
    dropped: list[int] = []
    log = PredictionLog(tmp_path, 1.0, 10_000)
    log.on_drop = lambda: dropped.append(1)
    log.offer(items(10), tensor=True)  # the writer is held: an offer that waited for room would never return
    release.set()
    log.close()
    assert log.dropped == len(dropped) >= 7 and log.written + log.dropped == 10, (log.written, log.dropped)
