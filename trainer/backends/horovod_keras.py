"""horovod.tensorflow.keras, imported against tf-keras: `from trainer.backends.horovod_keras import hvd`.

Horovod 0.28.1 takes its Keras backend with `from keras import backend as K` (written when `keras` was tf.keras's
own package). Since TensorFlow 2.16 that name is Keras 3: importing it loads Keras 3 beside tf-keras in every rank
(1.7 s of a core here, matplotlib and scikit-learn with it) and hands Horovod's callbacks the backend of a Keras that
trains nothing. While Horovod imports, `keras` is tf-keras, the Keras every rank trains with; then the name is
given back.
"""
from __future__ import annotations

import sys
from types import ModuleType

import tf_keras


def import_horovod_keras() -> ModuleType:
    """horovod.tensorflow.keras, its `keras` imports answered by tf-keras."""
    earlier = sys.modules.get("keras")
    sys.modules["keras"] = tf_keras
    try:
        import horovod.tensorflow.keras
    finally:
        if earlier is None:
            del sys.modules["keras"]
        else:
            sys.modules["keras"] = earlier
    return horovod.tensorflow.keras


hvd = import_horovod_keras()
