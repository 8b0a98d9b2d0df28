"""The model catalog: a name maps to one builder function (input shape, class count) -> tf.keras.Model.

Names and minimum input sizes are known without importing TensorFlow, so parameters validate fast.
Every model takes raw pixel values (0..255) and ends in a float32 softmax (safe under mixed precision).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

ModelBuilder = Callable[[tuple[int, int, int], int], Any]


@dataclass(frozen=True)
class ModelEntry:
    build: ModelBuilder
    min_size: int  # smallest height/width the architecture accepts


MODEL_CATALOG: dict[str, ModelEntry] = {}


def catalogued(name: str, min_size: int) -> Callable[[ModelBuilder], ModelBuilder]:
    """Decorator adding a builder to the catalog under `name`."""
    def add(builder: ModelBuilder) -> ModelBuilder:
        MODEL_CATALOG[name] = ModelEntry(builder, min_size)
        return builder
    return add


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """The registered model for this input shape and class count."""
    if name not in MODEL_CATALOG:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODEL_CATALOG))}")
    entry = MODEL_CATALOG[name]
    if min(input_shape[:2]) < entry.min_size:
        raise ValueError(f"model {name} needs inputs of at least {entry.min_size}x{entry.min_size}, "
                         f"got {input_shape[0]}x{input_shape[1]} (set input.image_size)")
    height, width, channels = input_shape
    return entry.build((height, width, channels), num_classes)


def _layers() -> Any:
    import tensorflow as tf
    return tf.keras.layers


def _head(num_classes: int) -> Any:
    return _layers().Dense(num_classes, activation="softmax", dtype="float32", name="probabilities")


@catalogued("cnn", min_size=6)
def cnn(input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """The MNIST CNN of NVIDIA DLI's multi-GPU notebooks: Conv32-Conv64-MaxPool-Dropout-Dense128-Dropout-Dense."""
    import tensorflow as tf
    layers = _layers()
    return tf.keras.Sequential([
        layers.Input(shape=input_shape), layers.Rescaling(1.0 / 255),
        layers.Conv2D(32, 3, activation="relu"), layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(pool_size=2), layers.Dropout(0.25), layers.Flatten(),
        layers.Dense(128, activation="relu"), layers.Dropout(0.5), _head(num_classes),
    ], name="cnn")


@catalogued("small_cnn", min_size=4)
def small_cnn(input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """The TensorFlow distributed-training guide's small CNN: Conv32-MaxPool-Flatten-Dense64-Dense."""
    import tensorflow as tf
    layers = _layers()
    return tf.keras.Sequential([
        layers.Input(shape=input_shape), layers.Rescaling(1.0 / 255),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(), layers.Flatten(),
        layers.Dense(64, activation="relu"), _head(num_classes),
    ], name="small_cnn")


@catalogued("resnet50", min_size=32)
def resnet50(input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """Keras's ResNet-50, trained from scratch (weights=None), on ImageNet-style [-1, 1] inputs."""
    import tensorflow as tf
    inputs = tf.keras.Input(shape=input_shape)
    scaled = _layers().Rescaling(1.0 / 127.5, offset=-1.0)(inputs)
    body = tf.keras.applications.ResNet50(weights=None, include_top=False, input_tensor=scaled, pooling="avg")
    return tf.keras.Model(inputs, _head(num_classes)(body.output), name="resnet50")


@catalogued("alexnet_owt", min_size=67)
def alexnet_owt(input_shape: tuple[int, int, int], num_classes: int) -> Any:
    """AlexNet "one weird trick" (arXiv:1404.5997) as in NVIDIA's nvcnn_hvd: 64-192-384-256-256, two 4096 FCs."""
    import tensorflow as tf
    layers = _layers()
    return tf.keras.Sequential([
        layers.Input(shape=input_shape), layers.Rescaling(1.0 / 255),
        layers.Conv2D(64, 11, strides=4, padding="valid", activation="relu"), layers.MaxPooling2D(3, 2),
        layers.Conv2D(192, 5, padding="same", activation="relu"), layers.MaxPooling2D(3, 2),
        layers.Conv2D(384, 3, padding="same", activation="relu"),
        layers.Conv2D(256, 3, padding="same", activation="relu"),
        layers.Conv2D(256, 3, padding="same", activation="relu"), layers.MaxPooling2D(3, 2),
        layers.Flatten(), layers.Dense(4096, activation="relu"), layers.Dropout(0.5),
        layers.Dense(4096, activation="relu"), layers.Dropout(0.5), _head(num_classes),
    ], name="alexnet_owt")
