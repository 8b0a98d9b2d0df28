"""The model catalog: every model builds and trains one step on tiny inputs; mixed precision."""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from trainer.models import MODEL_CATALOG, ModelCodeError, build_model, resolve_builder


@pytest.mark.parametrize(("name", "shape"), [("cnn", (8, 8, 1)), ("small_cnn", (8, 8, 1)), ("resnet50", (32, 32, 3)),
                                             ("alexnet_owt", (67, 67, 3))])
def test_each_model_builds_and_runs_one_step(name: str, shape: tuple[int, int, int]) -> None:
    import tensorflow as tf
    model = build_model(name, shape, 5)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(), loss="sparse_categorical_crossentropy")
    images = np.random.default_rng(0).uniform(0, 255, (2, *shape)).astype("float32")
    before = [w.copy() for w in model.get_weights()]
    loss = model.train_on_batch(images, np.array([0, 4]))
    assert np.isfinite(loss) and model.output_shape == (None, 5)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_catalog_names_and_minimum_sizes() -> None:
    assert set(MODEL_CATALOG) == {"cnn", "small_cnn", "resnet50", "alexnet_owt"}
    with pytest.raises(ModelCodeError, match=r"resnet50 needs images of at least 32x32, got inputs of shape \(8, 8, "):
        build_model("resnet50", (8, 8, 1), 10)
    with pytest.raises(ModelCodeError, match="model cnn is the catalog's: it takes no train.model_args"):
        build_model("cnn", (8, 8, 1), 10, {"units": 3})


GOOD = """import tensorflow as tf


def build(input_shape, outputs, units=8):
    return tf.keras.Sequential([tf.keras.layers.Input(input_shape), tf.keras.layers.Flatten(),
                                tf.keras.layers.Dense(units, activation="relu"),
                                tf.keras.layers.Dense(outputs, activation="softmax")])
"""


def test_the_user_s_builder_is_called_with_the_data_s_shapes_and_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text(GOOD)
    model = build_model(f"{tmp_path / 'net.py'}:build", (8, 8, 1), 10, {"units": 16})
    assert model.output_shape == (None, 10) and model.layers[1].units == 16
    copy = tmp_path / "copy.py"  # the job's copy is what a rank imports, whatever the name says
    copy.write_text(GOOD.replace("units=8", "units=4"))
    assert build_model("models/net.py:build", (8, 8, 1), 3, source=copy).layers[1].units == 4
    assert build_model("tests.trainer.user_builders:build", (4,), 2).output_shape == (None, 2)  # a package's
    with pytest.raises(ModelCodeError, match=rf"^no module nowhere_at_all\.nets on {socket.gethostname()} \(is "):
        build_model("nowhere_at_all.nets:build", (4,), 2)  # a rank's host without the user's package


@pytest.mark.parametrize(("content", "named", "said"), [
    (None, "build", r"^model file models/net\.py does not exist \("),
    (GOOD, "make", r"^models/net\.py: no function make \(it defines: build\)$"),
    ("import tensorflow as tf\nfrom nowhere import layer\n", "build",
     r"^models/net\.py:2: importing it raised ModuleNotFoundError: No module named 'nowhere'$"),
    ("def build(input_shape, outputs)\n    pass\n", "build", r"^models/net\.py:1: expected ':'$"),
    ("def build(input_shape, outputs):\n    x = 1\n    raise ValueError('no such layer')\n", "build",
     r"^/.*/net\.py:3: models/net\.py:build raised ValueError: no such layer$"),
    ("def build(input_shape, outputs):\n    return 'a model'\n", "build",
     r"^/.*/net\.py:1: models/net\.py:build returned str, not a Keras model"),
    (GOOD.replace("Dense(outputs", "Dense(outputs + 1"), "build",
     r"^/.*/net\.py:4: models/net\.py:build gives outputs of shape \(1, 11\), but the data needs \[batch, 10\]"),
])
def test_each_problem_of_the_user_s_model_is_one_line_naming_its_file_and_line(
        tmp_path: Path, content: str | None, named: str, said: str) -> None:
    source = tmp_path / "net.py"
    if content is not None:
        source.write_text(content)
    with pytest.raises(ModelCodeError, match=said) as raised:
        build_model(f"models/net.py:{named}", (8, 8, 1), 10, source=source)
    assert "\n" not in str(raised.value)


def test_a_keras_3_model_is_told_apart_from_no_model(tmp_path: Path) -> None:
    """`import keras` is Keras 3 beside tf-keras: the line says which Keras the job trains."""
    (tmp_path / "net.py").write_text("import keras\n\n\ndef build(input_shape, outputs):\n"
                                     "    return keras.Sequential([keras.layers.Dense(outputs)])\n")
    with pytest.raises(ModelCodeError, match=r"net\.py:build returned a Keras 3 model \(Sequential of `import "
                                             r"keras`\); ringflow trains tf\.keras models"):
        build_model(f"{tmp_path / 'net.py'}:build", (8, 8, 1), 10)


def test_a_changed_file_is_imported_again_and_a_relative_one_is_the_workspace_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that builds the model twice (a sweep's lead, a worker) builds what the file says now."""
    monkeypatch.setenv("RINGFLOW_WORKSPACE", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(GOOD)
    assert build_model("models/net.py:build", (4,), 2).layers[1].units == 8
    (tmp_path / "models" / "net.py").write_text(GOOD.replace("units=8", "units=5"))
    assert build_model("models/net.py:build", (4,), 2).layers[1].units == 5
    assert resolve_builder("cnn") is MODEL_CATALOG["cnn"].build
    assert resolve_builder("models/net.py:build").__module__.startswith("ringflow_user_")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_with_a_float32_output(policy: str) -> None:
    import tensorflow as tf
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        model = build_model("cnn", (8, 8, 1), 10)
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(), loss="sparse_categorical_crossentropy")
        loss = model.train_on_batch(np.ones((4, 8, 8, 1), "float32"), np.arange(4))
        assert np.isfinite(loss) and model.output.dtype == tf.float32
        assert model.layers[2].compute_dtype == policy.split("_")[1]
        assert isinstance(model.optimizer, tf.keras.mixed_precision.LossScaleOptimizer) == (policy == "mixed_float16")
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
