"""Epoch metrics sent in the background: nothing waits for the server, every epoch is in the spool first, sent in
order once the server answers again, and after the retry window only the spool keeps them (one line says so)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tasks.launch.output.metric_sender import BackgroundMetricLog
from trainer.metric_log import append_to_spool, read_spool


class FlakyServer:
    """Takes metrics once `up` is set; raises ConnectionError before."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.received: list[tuple[int, dict[str, float]]] = []
        self.stamps: list[int] = []
        self.refused = 0
        self.tried = threading.Event()  # set at the first refusal

    def send(self, epoch: int, metrics: dict[str, float], stamp: int) -> None:
        if not self.up.is_set():
            self.refused += 1
            self.tried.set()
            raise ConnectionError("Connection refused")
        self.received.append((epoch, metrics))
        self.stamps.append(stamp)


def test_epochs_wait_for_the_server_in_order_and_training_does_not(tmp_path: Path) -> None:
    server = FlakyServer()
    log = BackgroundMetricLog(server.send, tmp_path / "spool.jsonl", retry_seconds=60, first_pause=0.01)
    for epoch in range(3):
        log(epoch, {"loss": 1.0 / (epoch + 1)})  # returns at once though nothing is taken
    assert server.received == [] and len(read_spool(tmp_path / "spool.jsonl")) == 3
    server.tried.wait(timeout=60)  # the sender has met the server down (on a busy machine it starts late)
    server.up.set()
    assert log.close() == 0
    assert server.received == [(0, {"loss": 1.0}), (1, {"loss": 0.5}), (2, {"loss": 1 / 3})]
    assert server.refused >= 1 and not log.gave_up
    # each epoch keeps the time it was reported: a batch sent again is the same batch, which the store keeps once
    assert server.stamps == [stamp for _, _, stamp in read_spool(tmp_path / "spool.jsonl")]


def test_after_the_retry_window_the_spool_keeps_what_was_not_sent(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    server = FlakyServer()
    log = BackgroundMetricLog(server.send, tmp_path / "spool.jsonl", retry_seconds=0.2, first_pause=0.01)
    log(0, {"loss": 0.5})
    log(1, {"loss": 0.25})
    assert log.close() == 2 and log.gave_up
    assert capsys.readouterr().err.strip().endswith(f"epochs from 0 on wait in {tmp_path / 'spool.jsonl'}")
    in_spool = [spooled[:2] for spooled in read_spool(tmp_path / "spool.jsonl")]
    assert in_spool == [(0, {"loss": 0.5}), (1, {"loss": 0.25})]


def test_epochs_the_rank_spooled_itself_are_sent_and_not_spooled_twice(tmp_path: Path) -> None:
    server, spool = FlakyServer(), tmp_path / "spool.jsonl"
    server.up.set()
    log = BackgroundMetricLog(server.send, spool, retry_seconds=60, first_pause=0.01, spooled_already=True)
    for epoch in range(2):
        append_to_spool(spool, epoch, {"loss": 0.5 / (epoch + 1)}, 1000 + epoch)  # as rank 0 does, then prints
        log(epoch, {"loss": 0.5 / (epoch + 1)})
    assert log.close() == 0
    assert server.received == [(0, {"loss": 0.5}), (1, {"loss": 0.25})] and len(read_spool(spool)) == 2
