"""Validation is read again only when the prepared files changed: its report is stamped with their signature."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tasks.data.validate import DataInvalid, validated


def test_a_validation_is_reused_until_a_shard_changes(digits_data: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data, stamp = tmp_path / "prepared", tmp_path / "outputs" / "validated.json"
    shutil.copytree(digits_data, data)
    first = validated(data, stamp)
    assert first["valid"] and json.loads(stamp.read_text())["report"] == first
    with monkeypatch.context() as reading:
        reading.setattr("tasks.data.validate.validate", lambda _: pytest.fail("the files were read again"))
        assert validated(data, stamp) == first
    shard = sorted(data.glob("*.tfrecord"))[0]
    shard.write_bytes(shard.read_bytes()[:-1] + b"?")  # same size, new bytes: a new mtime
    with pytest.raises(DataInvalid, match=f"{shard.name}: sha256 differs from the manifest"):
        validated(data, stamp)


def test_a_stamp_of_other_files_is_not_taken(digits_data: Path, tmp_path: Path) -> None:
    data, stamp = tmp_path / "prepared", tmp_path / "validated.json"
    shutil.copytree(digits_data, data)
    report = validated(data, stamp)
    shard = sorted(data.glob("*.tfrecord"))[0]
    shard.write_bytes(b"not a record")
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns))
    stamp.write_text(json.dumps({"signature": "another", "report": report}))
    with pytest.raises(DataInvalid, match=shard.name):
        validated(data, stamp)
