"""What a training process leaves out at its start: the libraries tf-keras would import for features it never
uses, and autograph's rewriting of Horovod's graph functions and of the input pipeline's."""
from __future__ import annotations

import subprocess

import pytest

from tests.helpers import PYTHON, quiet_env

TRAINING_IMPORTS = """
import sys
from trainer.lean_imports import UNUSED_WHEN_TRAINING, skip_unused_libraries
skip_unused_libraries()
import horovod.tensorflow, tensorflow as tf
from trainer.backends import horovod_fit
tf.keras.Sequential([tf.keras.layers.Input((8, 8, 1)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)])
print(sorted(name for name in UNUSED_WHEN_TRAINING if sys.modules.get(name) is not None))
"""


def test_tensorflow_tf_keras_and_horovod_start_without_pandas_and_scipy() -> None:
    done = subprocess.run([PYTHON, "-c", TRAINING_IMPORTS], env=quiet_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_horovod_s_functions_are_left_to_graph_mode_as_tensorflow_s_are() -> None:
    import horovod.tensorflow as hvd_tf
    from tensorflow.python.autograph.impl import conversion

    import trainer.backends.horovod_keras  # noqa: F401  (what every Horovod backend imports)
    assert conversion.is_allowlisted(hvd_tf.allreduce) and conversion.is_allowlisted(hvd_tf.broadcast)


def test_horovod_s_own_tf_functions_are_traced_as_written() -> None:
    """The tf.functions Horovod makes for the gradients' allreduce and the variables' broadcast: autograph would
    rewrite Python control flow on a tensor into tf.cond; traced as written, it fails."""
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.functions as hvd_functions
    import tensorflow as tf

    import trainer.backends.horovod_keras  # noqa: F401  (what every Horovod backend imports)

    def absolute(x: tf.Tensor) -> tf.Tensor:
        if x > 0:
            return x
        return -x
    for module in (hvd_tf, hvd_functions):  # where Horovod's allreduce and its broadcast make their functions
        with pytest.raises(TypeError, match="symbolic `tf.Tensor` as a Python `bool` is not allowed"):
            module._make_subgraph(absolute)(tf.constant(-1))


def test_the_input_pipeline_s_functions_are_traced_as_written() -> None:
    """Python control flow on a tensor: autograph rewrites it into tf.cond; a function traced as written fails."""
    import tensorflow as tf

    from trainer.data import as_written

    def absolute(x: tf.Tensor) -> tf.Tensor:
        if x > 0:
            return x
        return -x
    assert list(tf.data.Dataset.range(-1, 2).map(absolute).as_numpy_iterator()) == [1, 0, 1]
    with pytest.raises(TypeError, match="symbolic `tf.Tensor` as a Python `bool` is not allowed"):
        tf.data.Dataset.range(-1, 2).map(as_written(absolute))
