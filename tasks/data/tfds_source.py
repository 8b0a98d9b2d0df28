"""`tfds:<name>[:<version>]`: any TensorFlow Datasets builder, with tfds's own download and cache in data_dir.

Images are read with SkipDecoding: the bytes tfds stored (PNG, JPEG) are kept as they are.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.data.source_data import SPLIT_ALIASES, SourceData, SourceError, SplitData

FALLBACK_SPLITS = ("train", "test")  # when a builder's split metadata is not at hand (e.g. tfds mock data)


def _builder(argument: str, data_dir: Path, download: bool) -> Any:
    import tensorflow_datasets as tfds
    try:
        builder = tfds.builder(argument, data_dir=str(data_dir))
    except tfds.core.registered.DatasetNotFoundError:
        raise SourceError(f"tfds has no dataset {argument!r} (see tfds.list_builders())") from None
    if not builder.is_prepared():
        if not download:
            raise SourceError(f"tfds dataset {argument} is not in {data_dir} and downloads are off: set "
                              f"data.download: true, or run `tfds build {argument} --data_dir {data_dir}` "
                              f"where there is internet and copy that folder here")
        builder.download_and_prepare()
    return builder


def _feature_keys(builder: Any) -> tuple[str, str]:
    """The image and label feature names (supervised keys when declared)."""
    supervised = builder.info.supervised_keys
    if supervised and len(supervised) == 2 and all(isinstance(k, str) for k in supervised):
        return supervised
    return "image", "label"


def _read_split(builder: Any, split: str, image_key: str, label_key: str) -> SplitData:
    import tensorflow_datasets as tfds
    dataset = builder.as_dataset(split=split, decoders={image_key: tfds.decode.SkipDecoding()})
    blobs, labels = [], []
    for example in tfds.as_numpy(dataset):
        blobs.append(bytes(example[image_key]))
        labels.append(int(example[label_key]))
    return SplitData(np.asarray(labels, dtype=np.int64), blobs=blobs)


def load_tfds(argument: str, data_dir: Path, download: bool) -> SourceData:
    """Read every split of the builder (train / validation / test, by tfds's names)."""
    builder = _builder(argument, data_dir, download)
    image_key, label_key = _feature_keys(builder)
    available = list(builder.info.splits.keys()) or list(FALLBACK_SPLITS)
    splits = {SPLIT_ALIASES[name]: _read_split(builder, name, image_key, label_key)
              for name in available if name in SPLIT_ALIASES}
    if "train" not in splits:
        raise SourceError(f"tfds dataset {argument} has no train split (it has {available})")
    classes = [str(name) for name in builder.info.features[label_key].names]
    return SourceData(f"tfds:{argument}", classes, splits,
                      {"tfds": builder.info.full_name, "data_dir": str(data_dir)})
