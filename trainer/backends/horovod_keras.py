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
from typing import Any

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


def leave_horovod_as_graph_code() -> None:
    """Horovod's graph functions (the tf.functions it makes for the gradient allreduce and the variables' broadcast)
    are graph code, written with tf.cond and no Python control flow on tensors, as TensorFlow's and tf-keras's are;
    autograph's rules leave those libraries as written but not Horovod, so every rank rewrote 16 Horovod functions
    from their source at its start: 0.6 s of a core (measured). Horovod joins those libraries' rule (TensorFlow
    reads the rules from its autograph config, as its own converter tests extend them; it has no public call)."""
    from tensorflow.python.autograph.core import config
    if not any(rule.matches("horovod") for rule in config.CONVERSION_RULES):
        config.CONVERSION_RULES = (config.DoNotConvert("horovod"), *config.CONVERSION_RULES)


def trace_horovod_subgraphs_as_written() -> None:
    """Horovod wraps its gradient allreduce and its variables' broadcast in tf.functions of their own
    (horovod.tensorflow.util._make_subgraph), with autograph on: a tf.function converts the function it wraps
    whatever the rules above say, so every rank rewrote the allreduce from its source and traced it through autograph
    (its control flow is on Python lists; its branches on tensors are tf.cond already). Here they are traced as
    written: tracing a CNN's averaged gradients took 0.22-0.29 s of a core against 0.44-0.56 s (measured)."""
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.functions as hvd_functions
    import tensorflow as tf

    def graph_function(function: Any) -> Any:
        return tf.function(function, autograph=False)
    for module in (hvd_tf, hvd_functions):
        module._make_subgraph = graph_function


hvd = import_horovod_keras()
leave_horovod_as_graph_code()  # Horovod: its own functions traced as written
trace_horovod_subgraphs_as_written()  # Horovod: its allreduce and broadcast traced as written too
