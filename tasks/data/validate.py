"""validate: prepared shards match their manifest, and every record parses, decodes (images) and has a valid label
(tensor data: finite values, and class ids in range when the targets are class ids)."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tasks.atomic import write_text_atomic
from tasks.data.source_data import file_sha256
from trainer.prepared_data import MANIFEST_NAME, SPLITS, data_kind, read_manifest, tensor_feature_spec

REPORT_NAME = "validation.json"
SCAN_BATCH = 1024  # tensor records checked at once


class DataInvalid(ValueError):
    """The prepared data does not match its manifest; the message names the shard (and record)."""
    bad_input = True


def _tf_error_text(message: str) -> str:
    """TensorFlow's error without its op and function-node decorations."""
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", message.splitlines()[0])
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text).strip().rstrip("'")


def _examples(path: Path, manifest: dict[str, Any]) -> Any:
    """The shard's records parsed one by one, in file order: (image, label) or, for tensor data, (x, y)."""
    import tensorflow as tf

    from trainer.data import as_written, decode_example
    if data_kind(manifest) == "tensor":
        spec = tensor_feature_spec(manifest)

        def parse(serialized: Any) -> tuple[Any, Any]:
            parsed = tf.io.parse_single_example(serialized, spec)
            return parsed["x"], parsed["y"]
        load = parse
    else:
        channels = manifest["channels"]
        load = lambda serialized: decode_example(serialized, channels)  # noqa: E731
    return tf.data.TFRecordDataset(str(path)).map(as_written(load), num_parallel_calls=tf.data.AUTOTUNE,
                                                  deterministic=True)


def record_problem(manifest: dict[str, Any]) -> Callable[[Any, Any], str | None]:
    """What is wrong with one parsed record (None: nothing): a label outside the classes; for tensor data also a
    value that is not finite, and a class id that is not one (when the targets are class ids)."""
    num_classes = manifest["num_classes"]
    image = data_kind(manifest) == "image"
    class_ids = image or bool(manifest.get("integer_targets"))

    def problem(x: Any, y: Any) -> str | None:
        if not image and not np.isfinite(x).all():
            return "features hold NaN or infinite values"
        if not image and not np.isfinite(y).all():
            return "targets hold NaN or infinite values"
        label = y if image else y[0]
        if class_ids and not (0 <= label < num_classes and label == np.round(label)):
            return f"label {label:g} outside 0..{num_classes - 1}"
        return None
    return problem


def scan_records(path: Path, manifest: dict[str, Any]) -> tuple[int, str | None]:
    """(records read, first problem as 'record N: ...' or None): parse, decode (images), values and label range,
    in file order."""
    import tensorflow as tf
    if data_kind(manifest) == "tensor":
        try:
            return _scan_tensor_batches(path, manifest)
        except tf.errors.OpError:
            pass  # a record that does not parse: found one by one below, to name it
    problem, index = record_problem(manifest), 0
    try:
        for x, y in _examples(path, manifest).as_numpy_iterator():
            if (found := problem(x, y)) is not None:
                return index, f"record {index}: {found}"
            index += 1
    except tf.errors.OpError as error:
        return index, f"record {index}: {_tf_error_text(error.message)}"
    return index, None


def _scan_tensor_batches(path: Path, manifest: dict[str, Any]) -> tuple[int, str | None]:
    """scan_records of tensor records parsed and checked SCAN_BATCH at a time (one by one is ~50x slower)."""
    import tensorflow as tf
    spec, problem, index = tensor_feature_spec(manifest), record_problem(manifest), 0
    parse = lambda serialized: tf.io.parse_example(serialized, spec)  # noqa: E731
    for parsed in tf.data.TFRecordDataset(str(path)).batch(SCAN_BATCH).map(parse).as_numpy_iterator():
        x, y = parsed["x"], parsed["y"]
        fine = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
        if manifest.get("integer_targets"):
            fine &= (y[:, 0] >= 0) & (y[:, 0] < manifest["num_classes"]) & (y[:, 0] == np.round(y[:, 0]))
        if not fine.all():
            first = int(np.argmin(fine))
            return index + first, f"record {index + first}: {problem(x[first], y[first])}"
        index += len(x)
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
                              "kind": data_kind(manifest), "task": manifest.get("task", "classification"),
                              "classes": manifest["num_classes"], "image_shape": manifest.get("image_shape"),
                              "splits": {}, "valid": True, "skipped_images": manifest.get("skipped", [])}
    if data_kind(manifest) == "tensor":
        report |= {"feature_shape": manifest["feature_shape"], "target_shape": manifest["target_shape"]}
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


def validated(data_dir: Path, stamp: Path) -> dict[str, Any]:
    """The data's validation report: the one `stamp` holds when it was made of these very files (their signature),
    else a new one, stamped (reading every record takes TensorFlow's import and seconds). The stamp lives outside the
    data: a signature of mtimes inside it would change the data's DVC hash from clone to clone."""
    signature = data_signature(data_dir)
    try:
        stamped = json.loads(stamp.read_text())
    except (OSError, ValueError):
        stamped = None
    if isinstance(stamped, dict) and stamped.get("signature") == signature:
        return dict(stamped["report"])
    report = validate(data_dir)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(stamp, json.dumps({"signature": signature, "report": report}))
    return report


def data_signature(data_dir: Path) -> str:
    """Digest of the manifest (every shard's sha256) and of each file's size and mtime: changes when the data
    version changes or any file is rewritten, so a stamped validation never stands for other bytes."""
    digest = hashlib.sha256((data_dir / MANIFEST_NAME).read_bytes())
    for path in sorted(data_dir.glob("*.tfrecord")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()
