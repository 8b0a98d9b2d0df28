"""Model registry: a name maps to one builder function (input shape, class count) -> tf.keras.Model.

Names are known without importing TensorFlow, so parameters validate fast.
"""
from __future__ import annotations

from typing import Any, Callable

ModelBuilder = Callable[[tuple[int, int, int], int], Any]
MODEL_BUILDERS: dict[str, ModelBuilder] = {}


def register(name: str) -> Callable[[ModelBuilder], ModelBuilder]:
    """Decorator adding a builder to the registry under `name`."""
    def add(builder: ModelBuilder) -> ModelBuilder:
        MODEL_BUILDERS[name] = builder
        return builder
    return add


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """The registered model, taking raw pixel values (0..255) and returning class probabilities."""
    if name not in MODEL_BUILDERS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODEL_BUILDERS))}")
    return MODEL_BUILDERS[name](tuple(input_shape), num_classes)


@register("cnn")
def cnn(input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """Seed 000's CNN: Conv32-Conv64-MaxPool-Dropout-Dense128-Dropout-Dense."""
    import tensorflow as tf
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Input(shape=input_shape),
        layers.Rescaling(1.0 / 255),
        layers.Conv2D(32, 3, activation="relu"),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(pool_size=2),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ], name="cnn")
