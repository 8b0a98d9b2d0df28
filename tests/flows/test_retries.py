"""The training task's retry policy, on a real Prefect server: failures are retried, bad input is not."""
from __future__ import annotations

import pytest
from prefect import flow, task
from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.pipeline import worth_retrying
from tasks.data.source_data import SourceError
from tasks.launch.output.diagnosis import RankFailed
from tasks.launch.preflight import PreflightError
from tasks.params import ParamsError

pytestmark = pytest.mark.slow  # a Prefect server


def test_a_failed_training_is_retried_but_bad_input_is_not(prefect_api: str) -> None:
    attempts: dict[str, int] = {}

    @task
    def attempt(name: str, error: Exception) -> None:
        attempts[name] = attempts.get(name, 0) + 1
        raise error

    @flow
    def attempts_flow() -> None:
        cases = {"rank died": RuntimeError("rank 1 exited with 1"), "preflight": PreflightError("np 9 > 2 slots"),
                 "params": ParamsError("bad parameter train.np"),
                 "rank killed": RankFailed("rank 1 on h2 was killed by signal SIGKILL (exit 137)", retryable=True),
                 "out of memory": RankFailed("rank 0 on h1 was killed by the out-of-memory killer", retryable=False),
                 "bad source": SourceError("tfds has no dataset 'x'")}
        for name, error in cases.items():
            attempt.with_options(retries=2, retry_delay_seconds=0, retry_condition_fn=worth_retrying)(
                name, error, return_state=True)

    with temporary_settings(updates={PREFECT_API_URL: prefect_api}):
        attempts_flow()
    assert attempts == {"rank died": 3, "preflight": 1, "params": 1, "rank killed": 3, "out of memory": 1,
                        "bad source": 1}
