"""The backend registry: preflight, the launch plan and the ranks' own plan count the same global batch for every
backend, with and without GPUs (GPU counts given to the spec, as a host would report them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.plan import training_data_plan
from tasks.launch.preflight import PreflightError, check_global_batch
from tasks.params import Params, TrainParams
from trainer import session
from trainer.backend_specs import BACKEND_NAMES, REGISTRY, backend_spec
from trainer.config import TrainerConfig
from trainer.prepared_data import read_manifest

NP, BATCH = 2, 8
# (backend, GPUs per host) -> records per optimizer step, written out by hand from how each strategy forms replicas
EXPECTED = {
    "horovod": {0: 16, 1: 16, 4: 16},  # one replica per rank, whatever the host has
    "horovod-tape": {0: 16, 1: 16, 4: 16},
    "mirrored": {0: 16, 1: 8, 4: 32},  # every local GPU, else np logical CPU devices
    "mirrored-tape": {0: 16, 1: 8, 4: 32},
    "central-storage": {0: 16, 1: 8, 4: 32},
    "one-device": {0: 8, 1: 8, 4: 8},
    "multiworker": {0: 16, 1: 16, 4: 16},  # one replica per worker: its own GPU of the host, as Horovod's ranks
    "multiworker-tape": {0: 16, 1: 16, 4: 16},
    "parameter-server": {0: 8, 1: 8, 4: 8},  # one worker's step, on its own GPU
}


def test_every_backend_has_its_expected_global_batch() -> None:
    assert set(EXPECTED) == set(BACKEND_NAMES)


def with_records(manifest: dict, count: int) -> dict:
    """The manifest with a training split of `count` records."""
    return manifest | {"splits": manifest["splits"] | {"train": manifest["splits"]["train"] | {"count": count}}}


@pytest.mark.parametrize("gpus", [0, 1, 4])
@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_preflight_plan_and_ranks_count_the_same_global_batch(digits_data: Path, tmp_path: Path, backend: str,
                                                              gpus: int) -> None:
    expected = EXPECTED[backend][gpus]
    params = Params(train=TrainParams(backend=backend, np=NP, batch_size=BATCH))
    manifest = read_manifest(digits_data)
    check_global_batch(params, with_records(manifest, expected), gpus)  # exactly one global batch: fits
    with pytest.raises(PreflightError, match=rf"= {expected}\) exceeds the {expected - 1} training records"):
        check_global_batch(params, with_records(manifest, expected - 1), gpus)
    launcher_plan = training_data_plan(params, manifest, gpus)
    assert launcher_plan.batch_size * len(launcher_plan.records) == expected
    config = TrainerConfig.model_validate(params.model_dump(mode="json") | {"job": {
        "data_dir": str(digits_data), "out_dir": str(tmp_path), "checkpoint_dir": str(tmp_path),
        "checkpoint_owner": "test", "augment": False, "data_fingerprint": "f",
        "metrics_retry_seconds": 60}})
    rank_plan = session.plan(config, processes=NP, gpus_per_host=gpus)
    assert rank_plan.global_batch == expected
    assert rank_plan.data == launcher_plan  # the same cut of the split, rank by rank


def test_only_horovod_fit_runs_elastic_and_each_module_is_one_of_the_backends_package() -> None:
    assert [name for name, spec in REGISTRY.items() if spec.elastic_capable] == ["horovod"]
    assert backend_spec("horovod").module_for(elastic=True) == "trainer.backends.horovod_elastic"
    assert backend_spec("horovod-tape").module_for(elastic=True) == "trainer.backends.horovod_tape"
    for spec in REGISTRY.values():
        assert (Path(__file__).parents[2] / (spec.module.replace(".", "/") + ".py")).is_file()
