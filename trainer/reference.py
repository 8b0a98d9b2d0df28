"""The reference a drift monitor compares the served items with, kept at training time: a sample of the test
split (at most REFERENCE_ITEMS items, evenly spaced, in the order the evaluation reads them), each item as its
summary features (trainer/input_summary.py: what the model server's prediction log records of a served item) and
the model's answer to it as the server gives it (the class it names and its score; a tensor model's first output),
as JSON rows beside the model (REFERENCE)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from trainer.input_summary import image_summary, tensor_summary
from trainer.prepared_data import data_kind, feature_spec

REFERENCE = "reference.json"
REFERENCE_ITEMS = 1000  # enough for the drift tests' power; summarizing more costs time after training
BATCH = 256


def sample_indices(count: int, most: int = REFERENCE_ITEMS) -> np.ndarray:
    """At most `most` indices of 0..count-1, evenly spaced (the whole split when it is small)."""
    return np.unique(np.linspace(0, count - 1, min(count, most)).round().astype(np.int64)) if count else \
        np.zeros(0, np.int64)


def split_inputs(data_dir: Path, manifest: dict[str, Any], split: str, task: str) -> Iterator[bytes | np.ndarray]:
    """Each item of a split as a client sends it (an image's encoded bytes, a tensor record's features), in the
    order the evaluation reads the split."""
    import tensorflow as tf

    from trainer.data import evaluation_records, tensor_parser
    records = evaluation_records(data_dir, manifest, split).batch(BATCH)
    if data_kind(manifest) == "tensor":
        for features, _ in records.map(tensor_parser(manifest, task)).as_numpy_iterator():
            yield from features
        return
    spec = {"image/encoded": feature_spec()["image/encoded"]}
    for parsed in records.map(lambda serialized: tf.io.parse_example(serialized, spec)).as_numpy_iterator():
        yield from (bytes(encoded) for encoded in parsed["image/encoded"])


def answers(outputs: np.ndarray, task: str, class_names: list[str]) -> list[tuple[str, float]]:
    """The server's answer to each item (servers/model/prediction_log.py's item_answer): a classifier's class and
    best score, a regressor's first output."""
    if task == "classification":
        return [(class_names[int(row.argmax())], float(row.max())) for row in outputs]
    return [("", float(row.ravel()[0])) for row in outputs]


def write_reference(model_dir: Path, data_dir: Path, manifest: dict[str, Any], outputs: np.ndarray, task: str,
                    class_names: list[str]) -> int:
    """The test split's reference rows (a sample: features and answers) into model_dir; how many."""
    chosen = set(sample_indices(len(outputs)).tolist())
    tensor = data_kind(manifest) == "tensor"  # a tensor classifier answers class ids, an image one class names
    given = answers(outputs, task, [str(index) for index in range(outputs.shape[-1])] if tensor else class_names)
    rows = []
    for index, item in enumerate(split_inputs(data_dir, manifest, "test", task)):
        if index in chosen:
            features = tensor_summary(np.asarray(item)) if tensor else image_summary(bytes(item))
            features.pop("values", None)
            rows.append(features | {"answer": given[index][0], "score": given[index][1]})
    partial = Path(model_dir) / f".{REFERENCE}.partial"
    partial.write_text(json.dumps(rows))
    os.replace(partial, Path(model_dir) / REFERENCE)
    return len(rows)
