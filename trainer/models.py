"""The models a job trains: the catalog's, by name, or the user's own builder, by import path.

A catalog name maps to one builder (input shape, class count) -> tf.keras.Model; names and minimum input sizes are
known without importing TensorFlow, so parameters validate fast. Every catalog model takes raw pixel values (0..255)
and ends in a float32 softmax (safe under mixed precision).
The user's builder is named "path/to/file.py:function" (a file: the job's copy of it, `source`, is what the ranks
import) or "package.module:function" (importable where the ranks run), and called as
function(input_shape, outputs, **train.model_args) -> a Keras model (docs/your-model.md). What goes wrong in it is
one line naming the file and line (ModelCodeError).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

ModelBuilder = Callable[[tuple[int, int, int], int], Any]
WORKSPACE_DEFAULT = Path(__file__).resolve().parents[1]  # the checkout, when RINGFLOW_WORKSPACE names none


class ModelCodeError(ValueError):
    """The user's model or loss code cannot give what the job needs; the message is one line naming the file and
    line where that applies."""
    bad_input = True


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


def build_model(name: str, input_shape: tuple[int, ...], outputs: int, model_args: dict[str, Any] | None = None,
                source: Path | None = None) -> Any:
    """The catalog's model of that name, or the user's builder's, for this input shape and output size (the class
    count, or the number of targets), checked to be a Keras model whose outputs fit."""
    if name not in MODEL_CATALOG:
        return user_model(name, tuple(input_shape), outputs, model_args or {}, source)
    if model_args:
        raise ModelCodeError(f"model {name} is the catalog's: it takes no train.model_args (got "
                             f"{', '.join(sorted(model_args))})")
    entry = MODEL_CATALOG[name]
    if len(input_shape) != 3 or min(input_shape[:2]) < entry.min_size:
        raise ModelCodeError(f"model {name} needs images of at least {entry.min_size}x{entry.min_size}, got inputs "
                             f"of shape {tuple(input_shape)} (set input.image_size, or bring a model of your own)")
    height, width, channels = input_shape
    return entry.build((height, width, channels), outputs)


def user_model(name: str, input_shape: tuple[int, ...], outputs: int, model_args: dict[str, Any],
               source: Path | None) -> Any:
    """The user's builder called, its result checked: a Keras model whose last axis holds `outputs` values."""
    import tensorflow as tf
    build = user_function(name, source)
    try:
        model = build(input_shape, outputs, **model_args)
    except Exception as error:  # the user's code: whatever it raises is told in one line
        raise ModelCodeError(f"{raised_at(error, build)}: {name} raised {type(error).__name__}: {error}") from None
    if not isinstance(model, tf.keras.Model) and type(model).__module__.split(".")[0] == "keras":
        raise ModelCodeError(f"{defined_at(build)}: {name} returned a Keras 3 model ({type(model).__name__} of "
                             "`import keras`); ringflow trains tf.keras models (tf-keras 2, which Horovod "
                             "averages): build it with `import tensorflow as tf` and tf.keras, or `import tf_keras "
                             "as keras`")
    if not isinstance(model, tf.keras.Model):
        raise ModelCodeError(f"{defined_at(build)}: {name} returned {type(model).__name__}, not a Keras model "
                             "(tf.keras.Model, Sequential or a subclass)")
    try:  # a subclassed model knows its output's shape only once called
        produced = model(tf.zeros((1, *input_shape)), training=False)
    except Exception as error:  # the user's call(): whatever it raises is told in one line
        raise ModelCodeError(f"{raised_at(error, build)}: {name}'s model cannot take inputs of shape {input_shape}: "
                             f"{type(error).__name__}: {error}") from None
    if not isinstance(produced, tf.Tensor) or produced.shape.rank != 2 or produced.shape[-1] != outputs:
        shape = tuple(produced.shape) if isinstance(produced, tf.Tensor) else type(produced).__name__
        raise ModelCodeError(f"{defined_at(build)}: {name} gives outputs of shape {shape}, but the data needs "
                             f"[batch, {outputs}]: {outputs} per example")
    return model


def resolve_builder(name: str, source: Path | None = None) -> Callable[..., Any]:
    """The builder train.model names: the catalog's (input_shape, num_classes), or the user's function
    (input_shape, outputs, **model_args), imported."""
    return MODEL_CATALOG[name].build if name in MODEL_CATALOG else user_function(name, source)


def user_function(name: str, source: Path | None = None) -> Callable[..., Any]:
    """The function an import path names ("file.py:function" from `source`, or the file as named; or
    "package.module:function"), imported."""
    module_name, _, function = name.rpartition(":")
    module = user_module(module_name, source)
    found = getattr(module, function, None)
    if not callable(found):
        defined = sorted(key for key, value in vars(module).items() if inspect.isfunction(value)
                         and value.__module__ == module.__name__)
        raise ModelCodeError(f"{module_name}: no function {function} (it defines: {', '.join(defined) or 'none'})")
    return found


def user_module(module_name: str, source: Path | None) -> ModuleType:
    """A user's module: a file, imported from `source` (else the path as named) under a name of its own, or an
    importable module."""
    if not module_name.endswith(".py"):
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name):
                raise ModelCodeError(f"no module {module_name} on {socket.gethostname()} (is its package installed "
                                     "where the ranks run?)") from None
            raise ModelCodeError(f"{raised_at(error)}: importing {module_name}: {error}") from None
        except Exception as error:  # the user's code at import
            raise ModelCodeError(f"{raised_at(error)}: importing {module_name}: {type(error).__name__}: "
                                 f"{error}") from None
    path = source or workspace_path(module_name)
    if not path.is_file():
        raise ModelCodeError(f"model file {module_name} does not exist ({path.resolve()})")
    return imported_file(module_name, path)


def workspace_path(named: str) -> Path:
    """A file as train.model names it: a relative path from the workspace (RINGFLOW_WORKSPACE, else the checkout;
    as tasks.paths.resolve_path reads it)."""
    path = Path(named).expanduser()
    root = os.environ.get("RINGFLOW_WORKSPACE")
    return path if path.is_absolute() else Path(root).expanduser() / path if root else WORKSPACE_DEFAULT / path


def imported_file(shown: str, path: Path) -> ModuleType:
    """The file imported as a module of its own (named after its place and content: a file changed since is
    imported again), once per process."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    module_name = "ringflow_user_" + "".join(c if c.isalnum() else "_" for c in str(path.resolve())) + "_" + digest
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        del sys.modules[module_name]
        raise ModelCodeError(f"{shown}:{error.lineno}: {error.msg}") from None
    except Exception as error:  # the user's code at import
        del sys.modules[module_name]
        line = next((frame.lineno for frame in reversed(traceback.extract_tb(error.__traceback__))
                     if Path(frame.filename) == path), None)
        raise ModelCodeError(f"{shown}:{line}: importing it raised {type(error).__name__}: {error}") from None
    return module


def check_loss_and_metrics(loss: str | None, loss_source: Path | None, metrics: list[str]) -> None:
    """train.loss (the user's function, imported; or a Keras loss by name) and train.metrics (Keras metrics by
    name) as a rank will take them: ModelCodeError in one line when one is not there."""
    import tensorflow as tf
    if loss and ":" in loss:
        user_function(loss, loss_source)
    elif loss:
        try:
            tf.keras.losses.get(loss)
        except ValueError:
            raise ModelCodeError(f"train.loss {loss!r} is no Keras loss (tf.keras.losses)") from None
    for name in metrics:
        try:
            found = tf.keras.metrics.get(name)  # an unknown name comes back as the name
        except ValueError:
            found = None
        if not callable(found):
            raise ModelCodeError(f"train.metrics: {name!r} is no Keras metric (tf.keras.metrics)")


def raised_at(error: BaseException, function: Callable[..., Any] | None = None) -> str:
    """`file:line` of the deepest frame of the user's code in the error's traceback (its function's file when
    given; else the deepest frame outside ringflow, TensorFlow and Keras)."""
    frames = traceback.extract_tb(error.__traceback__)
    home = inspect.getsourcefile(function) if function else None
    ours = [frame for frame in frames if (frame.filename == home if home else not foreign(frame.filename))]
    frame = ours[-1] if ours else (frames[-1] if frames else None)
    return f"{frame.filename}:{frame.lineno}" if frame else "?"


def foreign(filename: str) -> bool:
    """Whether a frame's file is ringflow's or a library's, not the user's."""
    return any(part in filename for part in ("site-packages", "/trainer/", "/tasks/", "<frozen", "/lib/python"))


def defined_at(function: Callable[..., Any]) -> str:
    """`file:line` where a function is defined."""
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return getattr(function, "__qualname__", "?")


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
