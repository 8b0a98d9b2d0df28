"""The tf.data service of a parameter-server job: the dispatcher at the address TF_CONFIG names starts once per
process, and a tf.data worker registered with it serves what is distributed through it."""
from __future__ import annotations

import json

import pytest
import tensorflow as tf

from tests.helpers import free_port
from trainer.backends import data_service


def test_the_dispatcher_address_is_the_one_tf_config_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}, "data_dispatcher": "head:5050"}))
    assert data_service.dispatcher_address() == "head:5050"


def test_the_dispatcher_starts_once_and_its_worker_serves_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_service, "_running", [])  # this test's servers only (stopped when collected)
    address = f"localhost:{free_port()}"
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}, "data_dispatcher": address}))
    assert data_service.start_dispatcher() == address
    assert data_service.start_dispatcher() == address and len(data_service._running) == 1  # the running one
    data_service.start_data_worker(f"localhost:{free_port()}")
    served = tf.data.Dataset.range(10).apply(tf.data.experimental.service.distribute(
        "parallel_epochs", f"grpc://{address}", job_name=data_service.JOB_NAME))
    assert sorted(int(value) for value in served) == list(range(10))
