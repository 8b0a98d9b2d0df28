"""validate: prepared shards match their manifest and every record parses, decodes and has a valid label."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from trainer.records import SPLITS, read_manifest


class DataInvalid(ValueError):
    """The prepared data does not match its manifest; the message names the shard (and record)."""


def _check_shard(path: Path, shard: dict[str, Any], manifest: dict[str, Any]) -> None:
    import tensorflow as tf

    from trainer.data import decode_example
    if not path.is_file():
        raise DataInvalid(f"{path.name}: missing")
    if hashlib.sha256(path.read_bytes()).hexdigest() != shard["sha256"]:
        raise DataInvalid(f"{path.name}: sha256 differs from the manifest (corrupt or changed)")
    shape, count = tuple(manifest["image_shape"]), 0
    try:
        for count, serialized in enumerate(tf.data.TFRecordDataset(str(path)), start=1):
            _, label = decode_example(serialized, shape)
            if not 0 <= int(label) < manifest["num_classes"]:
                raise DataInvalid(f"{path.name}: record {count - 1} has label {int(label)} out of range")
    except tf.errors.OpError as error:
        raise DataInvalid(f"{path.name}: record {count} unreadable: {error.message.splitlines()[0]}") from None
    if count != shard["count"]:
        raise DataInvalid(f"{path.name}: {count} records, manifest says {shard['count']}")


def validate(data_dir: Path) -> dict[str, Any]:
    """Check every shard; returns a report (counts per split). Raises DataInvalid on the first problem."""
    manifest = read_manifest(data_dir)
    report: dict[str, Any] = {"source": manifest["source"], "splits": {}}
    for split in SPLITS:
        shards = manifest["splits"][split]["shards"]
        for shard in shards:
            _check_shard(Path(data_dir) / shard["file"], shard, manifest)
        total = sum(shard["count"] for shard in shards)
        if total != manifest["splits"][split]["count"]:
            raise DataInvalid(f"split {split}: shards hold {total} records, manifest says "
                              f"{manifest['splits'][split]['count']}")
        report["splits"][split] = {"records": total, "shards": len(shards)}
    return report
