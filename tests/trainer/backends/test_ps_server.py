"""A worker task of a parameter-server cluster: serves its cluster address, runs a tf.data worker for the job's
dispatcher (data read through the service comes from it), and keeps beating while it serves."""
from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from tests.helpers import ROOT, free_port, quiet_env
from trainer.backends import data_service
from trainer.protocol import HEARTBEAT_ENV, HEARTBEAT_LINE


def lines_of(process: subprocess.Popen) -> queue.Queue:
    """The process's output lines, as they come."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in process.stdout], daemon=True).start()
    return lines


def wait_for(lines: queue.Queue, wanted: str, seconds: float) -> list[str]:
    """The lines up to and with `wanted`; fails after `seconds`."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while not seen or seen[-1] != wanted:
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            pytest.fail(f"no {wanted!r} in {seconds} s: {seen[-20:]}")
    return seen


def test_a_worker_serves_its_address_and_the_job_data_and_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_service, "_running", [])  # this test's dispatcher only (stopped when collected)
    dispatcher, worker = f"localhost:{free_port()}", free_port()
    tf_config = {"cluster": {"worker": [f"localhost:{worker}"], "ps": [f"localhost:{free_port()}"]},
                 "task": {"type": "worker", "index": 0}, "data_dispatcher": dispatcher}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    data_service.start_dispatcher()
    env = quiet_env(TF_CONFIG=json.dumps(tf_config), **{HEARTBEAT_ENV: "0.2"})
    server = subprocess.Popen([sys.executable, "-m", "trainer.backends.ps_server", "--job", "job.json"], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = lines_of(server)
        wait_for(lines, "worker 0 serving", 120)
        socket.create_connection(("localhost", worker), timeout=5).close()  # its gRPC server listens
        served = tf.data.Dataset.range(6).apply(tf.data.experimental.service.distribute(
            "parallel_epochs", f"grpc://{dispatcher}", job_name=data_service.JOB_NAME))
        assert sorted(int(value) for value in served) == list(range(6))  # the only tf.data worker: this one
        wait_for(lines, HEARTBEAT_LINE, 60)  # still beating while it serves (a bound: parallel tests load the cores)
        assert server.poll() is None
    finally:
        server.kill()
        server.wait(timeout=30)
