"""The local Prefect server a flow run starts when no API is configured: started once, reused, replaced when stale,
stopped by `make stop`. A real `prefect server start` in a private home."""
from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from servers.local_prefect import STATE_FILE_NAME, answers, ensure_server, live_server, read_note, stop_server


@pytest.mark.slow  # real Prefect servers (10-15 s to start each)
def test_a_server_is_started_once_reused_replaced_when_dead_and_stopped(tmp_path: Path) -> None:
    first, started = ensure_server(tmp_path)
    assert started and answers(first)
    assert ensure_server(tmp_path) == (first, False)  # the next run reuses it
    note_file = tmp_path / STATE_FILE_NAME
    note = json.loads(note_file.read_text())
    note_file.write_text(json.dumps(note | {"prefect_version": "2.0.0"}))
    assert live_server(tmp_path) is None  # another Prefect's server is not used
    note_file.write_text(json.dumps(note))
    os.killpg(first.pid, signal.SIGKILL)  # a server that died (a reboot, an OOM kill)
    os.waitpid(first.pid, 0)
    with socket.socket() as squatter:  # and its port taken meanwhile
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", first.port))
        squatter.listen()
        second, started = ensure_server(tmp_path)
    try:
        assert started and second.pid != first.pid and second.port != first.port and answers(second)
    finally:
        assert stop_server(tmp_path)
    assert live_server(tmp_path) is None and not answers(second)
    assert not stop_server(tmp_path)  # nothing left to stop


def test_a_noted_pid_that_is_not_a_prefect_server_is_never_signalled(tmp_path: Path) -> None:
    """After a reboot the noted pid may be anyone's: neither used nor stopped."""
    (tmp_path / STATE_FILE_NAME).write_text(json.dumps({"pid": os.getpid(), "port": 9, "prefect_version": "3.8.8"}))
    assert live_server(tmp_path) is None and read_note(tmp_path) is not None
    assert not stop_server(tmp_path)  # this test's own process is still here to say so
