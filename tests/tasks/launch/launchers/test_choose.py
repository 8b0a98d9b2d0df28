"""The ways to start a job's processes: every backend's launcher has its module, chosen through the registry."""
from __future__ import annotations

import pytest

from tasks.launch.launchers.choose import LAUNCHERS, SCHEDULER_JOBS, launcher_for
from tasks.params import Params
from trainer.backend_specs import BACKEND_NAMES, backend_spec
from trainer.choices import SCHEDULERS
from trainer.config import TrainParams


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_every_backend_is_started_by_the_launcher_its_spec_names(backend: str) -> None:
    chosen = launcher_for(Params(train=TrainParams(backend=backend)))
    assert chosen is LAUNCHERS[backend_spec(backend).launcher]


def test_only_servers_have_ports_to_pick() -> None:
    assert LAUNCHERS["horovodrun"].port_hosts(Params()) == []
    assert LAUNCHERS["process"].port_hosts(Params(train=TrainParams(backend="mirrored"))) == []
    assert LAUNCHERS["cluster"].port_hosts(Params(train=TrainParams(backend="multiworker", np=2))) == \
        ["localhost", "localhost"]


def test_every_scheduler_that_allocates_has_its_batch_job_and_no_other_has_one() -> None:
    assert set(SCHEDULER_JOBS) == {name for name, spec in SCHEDULERS.items() if spec.allocates}
