"""Validation names a damaged shard and the first bad record."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks.data.validate import DataInvalid, validate
from trainer.prepared_data import read_manifest


def damaged_copy(digits_data: Path, tmp_path: Path, truncate: bool) -> tuple[Path, str]:
    copy = tmp_path / "prepared"
    shutil.copytree(digits_data, copy)
    victim = copy / read_manifest(copy)["splits"]["validation"]["shards"][3]["file"]
    data = bytearray(victim.read_bytes())
    if truncate:
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    return copy, victim.name


@pytest.mark.parametrize("truncate", [False, True], ids=["corrupt", "truncated"])
def test_validation_names_a_damaged_shard(digits_data: Path, tmp_path: Path, truncate: bool) -> None:
    copy, name = damaged_copy(digits_data, tmp_path, truncate)
    with pytest.raises(DataInvalid, match=rf"^{name}: sha256 differs from the manifest; record (\d+): ") as error:
        validate(copy)
    first_bad = int(error.value.args[0].split("record ")[1].split(":")[0])
    assert 0 < first_bad < read_manifest(copy)["splits"]["validation"]["shards"][3]["count"]
