"""The model catalog: every model builds and trains one step on tiny inputs; mixed precision."""
from __future__ import annotations

import numpy as np
import pytest

from trainer.models import MODEL_CATALOG, build_model


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
    with pytest.raises(ValueError, match="resnet50 needs inputs of at least 32x32, got 8x8"):
        build_model("resnet50", (8, 8, 1), 10)


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
