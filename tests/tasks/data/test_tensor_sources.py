"""Tensor data: npz arrays of float features of any shape and CSV / Parquet tables, prepared into validated tensor
shards whose manifest says the shapes and the task; each bad input is one line naming what is wrong."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tasks.data.prepare import fingerprint, prepare
from tasks.data.source_data import SourceError
from tasks.data.validate import DataInvalid, validate
from tasks.params import DataParams
from trainer.data import rank_dataset
from trainer.prepared_data import SPLITS, data_task, output_size, read_manifest


def prepared(tmp_path: Path, dataset: str, **params: Any) -> dict[str, Any]:
    return prepare(DataParams(dataset=dataset, min_shards=2, **params), tmp_path / "prepared", progress=False).manifest


def read_all(data_dir: Path, task: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Every record of every split, as the input pipeline yields them."""
    manifest = read_manifest(data_dir)
    batches = [batch for split in SPLITS for batch in rank_dataset(data_dir, manifest, split, batch_size=64,
                                                                   task=task)]
    return np.concatenate([x.numpy() for x, _ in batches]), np.concatenate([y.numpy() for _, y in batches])


def as_rows(x: np.ndarray, y: np.ndarray) -> list[tuple[bytes, bytes]]:
    return sorted(zip(map(bytes, x.reshape(len(x), -1).astype(np.float32)),
                      map(bytes, y.reshape(len(y), -1).astype(np.float32))))


@pytest.mark.parametrize("targets", [1, 3])
def test_npz_float_regression_round_trips_exactly(tmp_path: Path, targets: int) -> None:
    rng = np.random.default_rng(targets)
    x = rng.normal(size=(120, 16, 3)).astype(np.float32)
    y = rng.normal(size=(120,) if targets == 1 else (120, targets))
    np.savez(tmp_path / "field.npz", x=x, y=y)
    manifest = prepared(tmp_path, f"npz:{tmp_path / 'field.npz'}")
    assert (manifest["kind"], manifest["task"], manifest["feature_shape"], manifest["target_shape"]) == \
        ("tensor", "regression", [16, 3], [targets])
    assert manifest["target_names"] == (["y"] if targets == 1 else ["y0", "y1", "y2"])
    assert (manifest["classes"], manifest["num_classes"], manifest["integer_targets"]) == ([], 0, False)
    assert manifest["feature_names"] is None and len(manifest["feature_stats"]["mean"]) == 48
    assert output_size(manifest, "regression") == targets
    with pytest.raises(ValueError, match="not class ids"):
        data_task(manifest, "classification")
    read_x, read_y = read_all(tmp_path / "prepared")
    assert read_x.dtype == np.float32 and read_x.shape == (120, 16, 3) and read_y.shape == (120, targets)
    assert as_rows(read_x, read_y) == as_rows(x, y)
    assert validate(tmp_path / "prepared")["splits"]["test"]["records"] == manifest["splits"]["test"]["count"]


def test_npz_float_points_with_class_ids_are_classification(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(90, 2)), rng.integers(0, 3, 90)
    np.savez(tmp_path / "points.npz", x=x, y=y, classes=np.array(["a", "b", "c"]))
    manifest = prepared(tmp_path, f"npz:{tmp_path / 'points.npz'}")
    assert (manifest["kind"], manifest["task"], manifest["feature_shape"], manifest["target_shape"]) == \
        ("tensor", "classification", [2], [1])
    assert (manifest["classes"], manifest["num_classes"], manifest["integer_targets"],
            manifest["class_names_only"]) == (["a", "b", "c"], 3, True, False)
    read_x, labels = read_all(tmp_path / "prepared")
    assert labels.dtype == np.int32 and labels.shape == (90,)
    assert as_rows(read_x, labels) == as_rows(x.astype(np.float32), y)
    assert data_task(manifest, "regression") == "regression"  # ids are numbers: stating regression is allowed
    assert read_all(tmp_path / "prepared", "regression")[1].shape == (90, 1)


def test_npz_string_targets_are_class_names_and_uint8_images_stay_images(tmp_path: Path) -> None:
    x = np.random.default_rng(3).normal(size=(40, 4))
    np.savez(tmp_path / "named.npz", x=x, y=np.array(["dog", "cat"] * 20))
    manifest = prepared(tmp_path, f"npz:{tmp_path / 'named.npz'}")
    assert (manifest["task"], manifest["classes"], manifest["class_names_only"]) == ("classification",
                                                                                    ["cat", "dog"], True)
    with pytest.raises(ValueError, match="class names"):
        data_task(manifest, "regression")
    np.savez(tmp_path / "images.npz", x=np.zeros((30, 5, 5), np.uint8), y=np.arange(30) % 2)
    images = prepare(DataParams(dataset=f"npz:{tmp_path / 'images.npz'}", min_shards=1), tmp_path / "img",
                     progress=False).manifest
    assert (images["kind"], images["task"], images["image_shape"], images["formats"]) == \
        ("image", "classification", [5, 5, 1], {"png": 30})


def write_table(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False) if path.suffix == ".csv" else frame.to_parquet(path)
    return path


def iris_like(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame({"width": rng.normal(size=rows), "ignored": rng.normal(size=rows),
                         "height": rng.integers(0, 9, rows), "species": rng.choice(["setosa", "virginica"], rows),
                         "mass": rng.normal(size=rows), "age": rng.normal(size=rows)})


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_with_named_features_and_a_string_target_is_classification(tmp_path: Path, suffix: str) -> None:
    frame = iris_like()
    path = write_table(tmp_path / f"plants{suffix}", frame)
    manifest = prepared(tmp_path, f"table:{path}", features=["width", "height"], target="species")
    assert (manifest["kind"], manifest["task"], manifest["feature_shape"], manifest["feature_names"]) == \
        ("tensor", "classification", [2], ["width", "height"])
    assert (manifest["classes"], manifest["target_names"], manifest["class_names_only"]) == \
        (["setosa", "virginica"], ["species"], True)
    x, labels = read_all(tmp_path / "prepared")
    expected = frame[["width", "height"]].to_numpy(np.float32), (frame["species"] == "virginica").to_numpy(int)
    assert as_rows(x, labels) == as_rows(*expected)
    assert validate(tmp_path / "prepared")["kind"] == "tensor"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_s_float_targets_are_regression_and_its_features_default_to_the_rest(tmp_path: Path,
                                                                                     suffix: str) -> None:
    frame = iris_like().drop(columns=["species"])
    path = write_table(tmp_path / f"plants{suffix}", frame)
    several = prepared(tmp_path, f"table:{path}", target=["mass", "age"])
    assert (several["task"], several["target_shape"], several["target_names"], several["feature_names"]) == \
        ("regression", [2], ["mass", "age"], ["width", "ignored", "height"])
    x, y = read_all(tmp_path / "prepared")
    assert as_rows(x, y) == as_rows(frame[["width", "ignored", "height"]].to_numpy(), frame[["mass", "age"]].to_numpy())
    last = prepare(DataParams(dataset=f"table:{path}", features=["width"]), tmp_path / "last", progress=False)
    assert (last.manifest["target_names"], last.manifest["task"]) == (["age"], "regression")  # the last column
    ids = prepare(DataParams(dataset=f"table:{path}", target="height"), tmp_path / "ids", progress=False).manifest
    assert (ids["task"], ids["num_classes"], ids["class_names_only"]) == ("classification", 9, False)


def test_the_prepare_cache_knows_the_table_s_content_and_columns(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.csv", iris_like())
    params = DataParams(dataset=f"table:{path}", target="mass", features=["width"])
    first = fingerprint(params)
    assert fingerprint(params.model_copy(update={"features": ["width", "age"]})) != first
    assert fingerprint(params.model_copy(update={"target": "age"})) != first
    write_table(path, iris_like(61))
    assert fingerprint(params) != first


@pytest.mark.parametrize(("make", "settings", "message"), [
    (lambda f: f, {"target": "weight"}, r"^t\.csv has no column 'weight' \(its columns: width, ignored, height, "),
    (lambda f: f, {"features": ["width", "species"], "target": "mass"},
     r"^t\.csv: feature column 'species' is not numeric \((str|object)\): encode it"),
    (lambda f: f.assign(width=f["width"].where(f.index % 7 != 0)), {"target": "mass", "features": ["width"]},
     r"^t\.csv: missing values \(NaN\) in column 'width' \(9 of 60\)"),
    (lambda f: f.assign(mass=f["mass"].where(f.index != 3)), {"target": "mass", "features": ["width"]},
     r"^t\.csv: missing values \(NaN\) in column 'mass' \(1 of 60\)"),
    (lambda f: f, {"target": ["mass", "species"], "features": ["width"]},
     r"^t\.csv: target column 'species' holds class names: a classification target must be the only target"),
], ids=["missing column", "text feature", "NaN feature", "NaN target", "names among targets"])
def test_a_bad_table_is_one_line_naming_the_column(tmp_path: Path, make: Any, settings: dict[str, Any],
                                                    message: str) -> None:
    path = write_table(tmp_path / "t.csv", make(iris_like()))
    with pytest.raises(SourceError, match=message) as error:
        prepared(tmp_path, f"table:{path}", **settings)
    assert "\n" not in str(error.value) and not (tmp_path / "prepared").exists()


def test_bad_arrays_are_one_line_each(tmp_path: Path) -> None:
    np.save(tmp_path / "single.npy", np.zeros((4, 2)))
    (tmp_path / "single.npz").write_bytes((tmp_path / "single.npy").read_bytes())
    cases = {"single": r"single\.npz is a single \.npy array, not an \.npz archive with x and y"}
    x = np.random.default_rng(5).normal(size=(20, 3))
    np.savez(tmp_path / "nan.npz", x=np.where(np.arange(60).reshape(20, 3) % 11 == 0, np.nan, x), y=np.ones(20))
    cases["nan"] = r"^nan\.npz:x has 6 missing or infinite value\(s\) \(NaN, inf\)"
    np.savez(tmp_path / "short.npz", x=x, y=np.ones(19))
    cases["short"] = r"train has 20 examples but 19 targets"
    np.savez(tmp_path / "ids.npz", x=x, y=np.arange(20) % 4, classes=np.array(["a", "b"]))
    cases["ids"] = r"with 2 class names the targets must be class ids 0\.\.1"
    for name, message in cases.items():
        with pytest.raises(SourceError, match=message):
            prepared(tmp_path, f"npz:{tmp_path / name}.npz")


@pytest.mark.parametrize(("records", "problem"), [
    ([(0, 1), (0, 0), (0, 5)], "record 2: label 5 outside 0..1"),
    ([(0, 1), (np.nan, 0)], "record 1: features hold NaN or infinite values"),
], ids=["class id", "NaN"])
def test_validation_names_a_bad_tensor_record(tmp_path: Path, records: list[tuple[float, int]], problem: str) -> None:
    from tasks.data.tfrecord_writer import TFRecordFile, encode_tensor_example
    rng = np.random.default_rng(6)
    np.savez(tmp_path / "p.npz", x=rng.normal(size=(40, 2)), y=rng.integers(0, 2, 40))
    manifest = prepared(tmp_path, f"npz:{tmp_path / 'p.npz'}")
    shard = manifest["splits"]["train"]["shards"][0]
    with TFRecordFile(tmp_path / "prepared" / shard["file"]) as writer:
        for value, label in records:
            writer.write(encode_tensor_example(np.full(2, value), np.array([label])))
    shard.update(sha256=writer.sha256.hexdigest(), count=len(records), bytes=writer.bytes)
    (tmp_path / "prepared" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataInvalid, match=rf"^{shard['file']}: checksum matches; {re.escape(problem)}$"):
        validate(tmp_path / "prepared")


def test_validation_names_the_first_record_of_a_damaged_tensor_shard(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", x=np.random.default_rng(7).normal(size=(300, 8)), y=np.zeros(300))
    manifest = prepared(tmp_path, f"npz:{tmp_path / 'p.npz'}")
    victim = tmp_path / "prepared" / manifest["splits"]["train"]["shards"][1]["file"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    damaged = rf"^{victim.name}: sha256 differs from the manifest; record (\d+): "
    with pytest.raises(DataInvalid, match=damaged) as error:
        validate(tmp_path / "prepared")
    first_bad = int(str(error.value).split("record ")[1].split(":")[0])
    assert 0 < first_bad < manifest["splits"]["train"]["shards"][1]["count"]
