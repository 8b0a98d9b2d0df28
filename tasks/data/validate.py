"""validate: prepared shards match their manifest, and every record parses, decodes and has a valid label."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tasks.atomic import write_text_atomic
from tasks.data.source_data import file_sha256
from trainer.prepared_data import MANIFEST_NAME, SPLITS, read_manifest

REPORT_NAME = "validation.json"


class DataInvalid(ValueError):
    """The prepared data does not match its manifest; the message names the shard (and record)."""
    bad_input = True


def _tf_error_text(message: str) -> str:
    """TensorFlow's error without its op and function-node decorations."""
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", message.splitlines()[0])
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text).strip().rstrip("'")


def scan_records(path: Path, manifest: dict[str, Any]) -> tuple[int, str | None]:
    """(records read, first problem as 'record N: ...' or None): parse, decode, label range, in file order."""
    import tensorflow as tf

    from trainer.data import as_written, decode_example
    channels, num_classes = manifest["channels"], manifest["num_classes"]
    records = tf.data.TFRecordDataset(str(path)).map(as_written(lambda s: decode_example(s, channels)),
                                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    index = 0
    try:
        for _, label in records.as_numpy_iterator():
            if not 0 <= label < num_classes:
                return index, f"record {index}: label {label} outside 0..{num_classes - 1}"
            index += 1
    except tf.errors.OpError as error:
        return index, f"record {index}: {_tf_error_text(error.message)}"
    return index, None


def check_shard(path: Path, shard: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Raise DataInvalid naming the shard (and the first bad record) when it differs from the manifest."""
    if not path.is_file():
        raise DataInvalid(f"{path.name}: missing")
    count, problem = scan_records(path, manifest)
    checksum_ok = file_sha256(path) == shard["sha256"]
    if problem or not checksum_ok:
        what = "sha256 differs from the manifest" if not checksum_ok else "checksum matches"
        raise DataInvalid(f"{path.name}: {what}; " + (problem or f"all {count} records read"))
    if count != shard["count"]:
        raise DataInvalid(f"{path.name}: {count} records, manifest says {shard['count']}")


def validate(data_dir: Path) -> dict[str, Any]:
    """Check every shard; returns the report (per split: records, shards, bytes). Raises DataInvalid."""
    manifest = read_manifest(data_dir)
    report: dict[str, Any] = {"source": manifest["source"], "fingerprint": manifest.get("fingerprint"),
                              "classes": manifest["num_classes"], "image_shape": manifest["image_shape"],
                              "splits": {}, "valid": True, "skipped_images": manifest.get("skipped", [])}
    for split in SPLITS:
        shards = manifest["splits"][split]["shards"]
        for shard in shards:
            check_shard(Path(data_dir) / shard["file"], shard, manifest)
        total = sum(shard["count"] for shard in shards)
        if total != manifest["splits"][split]["count"]:
            raise DataInvalid(f"split {split}: shards hold {total} records, manifest says "
                              f"{manifest['splits'][split]['count']}")
        report["splits"][split] = {"records": total, "shards": len(shards),
                                   "bytes": sum(shard["bytes"] for shard in shards)}
    return report


def save_report(report: dict[str, Any], data_dir: Path) -> None:
    """The report beside the data it describes."""
    write_text_atomic(data_dir / REPORT_NAME, json.dumps(report, indent=2))


def data_signature(data_dir: Path) -> str:
    """Digest of the manifest (every shard's sha256) and of each file's size and mtime: changes when the data
    version changes or any file is rewritten, so a cached validation never stands for other bytes."""
    digest = hashlib.sha256((data_dir / MANIFEST_NAME).read_bytes())
    for path in sorted(data_dir.glob("*.tfrecord")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()
