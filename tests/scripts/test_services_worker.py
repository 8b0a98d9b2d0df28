"""`make services`' worker runs only what was deployed: the work pool's base job template changed through the API,
with the services' credentials (.services/client.env), to a command of one's choosing runs nothing, and the next
untouched deployment run trains as before."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.scripts.services import Services, started_services
from tests.scripts.test_serve import TEMPLATE_REFUSED, template_changed_then_restored

pytestmark = pytest.mark.slow  # PostgreSQL, two servers, a worker, a whole pipeline


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    yield from started_services(tmp_path_factory.mktemp("services-checkout"))


def test_a_pool_template_changed_through_the_api_runs_nothing_as_the_worker(services: Services) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ringflow-marker-", dir="/tmp"))
    folder.chmod(0o777)  # the worker's user could write the marker there, were the command run
    try:
        refused, trained = asyncio.run(template_changed_then_restored(services.client, folder / "ran", epochs=1,
                                                                      np=1))
        assert not (folder / "ran").exists()
    finally:
        shutil.rmtree(folder)
    assert refused.type.value == "CRASHED" and refused.message == TEMPLATE_REFUSED
    worker_log = (services.home / "logs" / "worker.log").read_text()
    assert len([line for line in worker_log.splitlines() if ") refused: " in line]) == 1
    assert trained.type.value == "COMPLETED", trained.message
