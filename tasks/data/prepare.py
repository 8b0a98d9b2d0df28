"""prepare: a dataset source -> train / validation / test TFRecord shards plus manifest.json (images: encoded image
records; tensor data: float features and targets, tasks/data/tfrecord_writer.py).

Skipped (no conversion work) when the manifest already there was made from the same source and params.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.atomic import atomic_dir
from tasks.data.convert import plan_shards, run_jobs
from tasks.data.source_data import SourceData, SourceError, SplitData
from tasks.data.sources import load_source, source_identity
from tasks.params import DataParams
from tasks.paths import PREPARED_DIR, resolve_path
from trainer.prepared_data import MANIFEST_NAME, SPLITS, read_manifest

FORMAT_VERSION = 2
MAX_STATS_FEATURES = 4096  # feature positions up to which the manifest holds their mean and std


@dataclass(frozen=True)
class PrepareResult:
    """The manifest of the prepared data and whether conversion was skipped as up to date."""
    manifest: dict[str, Any]
    skipped: bool


def carve_splits(source: SourceData, params: DataParams) -> dict[str, SplitData]:
    """Missing validation / test splits carved from train, then every split shuffled; all by seed."""
    rng = np.random.default_rng(params.seed)
    splits, train = dict(source.splits), source.splits["train"]
    order, start = rng.permutation(len(train)), 0
    for split, fraction in (("test", params.test_fraction), ("validation", params.val_fraction)):
        if split not in splits:
            size = max(1, round(len(train) * fraction))
            splits[split], start = train.take(order[start:start + size]), start + size
    splits["train"] = train.take(order[start:])
    return {split: splits[split].take(rng.permutation(len(splits[split]))) for split in SPLITS}


def fingerprint(params: DataParams) -> str:
    """What determines the prepared data: source identity, conversion params and format version."""
    settings = params.model_dump(exclude={"workers", "download"})
    identity = source_identity(params.dataset, tfds_dir(params))
    blob = json.dumps({"format": FORMAT_VERSION, "params": settings, "source": identity}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def tfds_dir(params: DataParams) -> Path:
    """Where tfds keeps its downloads (data.data_dir, relative to the workspace)."""
    return resolve_path(params.data_dir)


def up_to_date(out_dir: Path, expected: str) -> dict[str, Any] | None:
    """The existing manifest when it has this fingerprint and all its shards are present at full size."""
    try:
        manifest = read_manifest(out_dir)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if manifest.get("fingerprint") != expected:
        return None
    for split in manifest["splits"].values():
        for shard in split["shards"]:
            path = out_dir / shard["file"]
            if not path.is_file() or path.stat().st_size != shard["bytes"]:
                return None
    return manifest


def shape_statistics(shapes: Counter) -> dict[str, Any]:
    """Image shape statistics and the shape the model should see (the common one, else the median)."""
    heights = np.repeat([s[0] for s in shapes], list(shapes.values()))
    widths = np.repeat([s[1] for s in shapes], list(shapes.values()))
    channels = sorted({s[2] for s in shapes})
    model_channels = 1 if channels == [1] else 3
    uniform = len({s[:2] for s in shapes}) == 1
    shape = [int(np.median(heights)), int(np.median(widths)), model_channels]
    stats = {name: {"min": int(v.min()), "max": int(v.max()), "mean": round(float(v.mean()), 2)}
             for name, v in (("height", heights), ("width", widths))}
    return {"image_shape": shape, "channels": model_channels, "uniform_size": uniform,
            "shape_stats": {**stats, "channels": channels,
                            "most_common": [[list(s), n] for s, n in shapes.most_common(5)]}}


def tensor_fields(source: SourceData, train: SplitData) -> dict[str, Any]:
    """What a manifest of tensor data says of its features and targets (feature_stats: over train, per feature
    position, when there are at most MAX_STATS_FEATURES of them)."""
    info, features = source.tensor, train.features
    assert info is not None and features is not None  # tensor data
    flat = features.reshape(len(features), -1).astype(np.float64)
    stats = ({"mean": [float(v) for v in flat.mean(axis=0)], "std": [float(v) for v in flat.std(axis=0)]}
             if flat.shape[1] <= MAX_STATS_FEATURES else None)
    return {"kind": "tensor", "task": info.task, "feature_shape": [int(v) for v in features.shape[1:]],
            "feature_names": info.feature_names, "target_shape": [int(train.labels.shape[1])],
            "target_names": info.target_names, "integer_targets": info.integer_targets,
            "class_names_only": info.class_names_only, "feature_stats": stats}


def build_manifest(source: SourceData, params: DataParams, results: dict[str, list[dict]],
                   train: SplitData) -> dict[str, Any]:
    """The manifest: the source, params and fingerprint, the classes, the data's shapes and every shard."""
    shapes, formats, skipped = Counter[str](), Counter[str](), []
    splits = {}
    for split, shard_results in results.items():
        for result in shard_results:
            shapes.update(result.pop("shapes"))
            formats.update(result.pop("formats"))
            skipped += [bad | {"split": split} for bad in result.pop("bad")]
        splits[split] = {"count": sum(r["count"] for r in shard_results), "shards": shard_results}
    described = (tensor_fields(source, train) if source.tensor is not None else
                 {"kind": "image", "task": "classification", "formats": dict(formats), **shape_statistics(shapes)})
    return {"format_version": FORMAT_VERSION, "fingerprint": fingerprint(params), "source": source.name,
            "source_identity": source.identity, "params": params.model_dump(), "classes": source.classes,
            "num_classes": len(source.classes), **described, "splits": splits, "skipped": skipped}


def check_bad_images(manifest: dict[str, Any], policy: str) -> None:
    """data.bad_images: `fail` stops at the first conversion with unreadable images, naming the first ones."""
    skipped = manifest["skipped"]
    if skipped and policy == "fail":
        named = "; ".join(f"{bad['file']}: {bad['reason']}" for bad in skipped[:3])
        raise SourceError(f"{len(skipped)} image(s) cannot be decoded ({named}{'; ...' if len(skipped) > 3 else ''})"
                          f": fix or remove them, or set data.bad_images: skip")


def prepare(params: DataParams, out_dir: Path = PREPARED_DIR, progress: bool = True) -> PrepareResult:
    """Convert the dataset in `params` to sharded TFRecords under `out_dir` (atomically), unless up to date."""
    existing = up_to_date(out_dir, fingerprint(params))
    if existing is not None:
        return PrepareResult(existing, skipped=True)
    source = load_source(params.dataset, tfds_dir(params), params.download, params.features, params.target)
    splits = carve_splits(source, params)
    with atomic_dir(out_dir) as tmp:
        jobs = {split: plan_shards(split, splits[split], tmp, params.shard_bytes, params.min_shards,
                                    params.max_image_side)
                for split in SPLITS}
        written = run_jobs([job for split_jobs in jobs.values() for job in split_jobs], params.workers, progress)
        results = {split: [written[job.path] for job in split_jobs] for split, split_jobs in jobs.items()}
        manifest = build_manifest(source, params, results, splits["train"])
        check_bad_images(manifest, params.bad_images)
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    return PrepareResult(manifest, skipped=False)


def left_out_line(manifest: dict[str, Any], data_dir: Path) -> str | None:
    """The images data.bad_images: skip left out of the data, in one line (None: none)."""
    left_out = manifest.get("skipped")
    if not left_out:
        return None
    names = ", ".join(bad["file"] for bad in left_out[:3]) + (", ..." if len(left_out) > 3 else "")
    return (f"{len(left_out)} image(s) left out because they cannot be decoded (data.bad_images: skip), listed in "
            f"{data_dir / 'manifest.json'}: {names}")
