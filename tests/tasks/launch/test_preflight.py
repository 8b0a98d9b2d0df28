"""Preflight: each launch that would fail is refused with one clear line before anything starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.preflight import PreflightError, preflight
from tasks.params import InputParams, Params, TrainParams


@pytest.mark.parametrize(("train", "inputs", "message"), [
    ({"model": "resnet50"}, {}, "model resnet50 needs inputs of at least 32x32; the data is 8x8"),
    ({"hosts": "nosuchhost.invalid:2"}, {}, "host 'nosuchhost.invalid' does not resolve"),
    ({"np": 3, "hosts": "localhost:2"}, {}, "np 3 exceeds the 2 slots of localhost:2"),
    ({"backend": "multiworker", "np": 3, "hosts": "localhost:2"}, {}, "np 3 exceeds the 2 slots of localhost:2"),
    ({"hostfile": "/no/hostfile"}, {}, "hostfile /no/hostfile does not exist"),
    ({"jit_compile": True}, {}, "jit_compile needs Horovod's XLA ops"),
    ({"controller": "mpi"}, {}, "Horovod is not built with the MPI controller"),
])
def test_each_preflight_error_is_one_clear_line(digits_data: Path, train: dict, inputs: dict, message: str) -> None:
    from tasks.launch.preflight import check_build_report
    if train.get("controller") == "mpi" and "[X] MPI" in check_build_report().split("Available Tensor")[0]:
        pytest.skip("this Horovod has MPI")
    with pytest.raises(PreflightError, match=f"^{message}"):
        preflight(Params(train=TrainParams(**train), input=InputParams(**inputs)), digits_data)


def test_preflight_without_data_names_the_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match="no prepared data: .*manifest.json is missing"):
        preflight(Params(), tmp_path)


def test_preflight_passes_a_resized_resnet(digits_data: Path) -> None:
    assert preflight(Params(train=TrainParams(model="resnet50", backend="mirrored"),
                            input=InputParams(image_size=32)), digits_data) is None
