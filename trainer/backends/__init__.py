"""The training backends: each name maps to the module whose `train(config)` one process runs.

The one list of backends: the parameter model, preflight and the launcher all read it from here.
"""
from __future__ import annotations

import importlib
from typing import Any

BACKEND_MODULES = {
    "horovod": "trainer.backends.horovod_fit",  # Keras fit with hvd.DistributedOptimizer (horovodrun)
    "horovod-tape": "trainer.backends.horovod_tape",  # custom loop with hvd.DistributedGradientTape (horovodrun)
    "mirrored": "trainer.backends.distribute",  # tf.distribute strategies through Keras fit ...
    "multiworker": "trainer.backends.distribute",
    "central-storage": "trainer.backends.distribute",
    "one-device": "trainer.backends.distribute",
    "parameter-server": "trainer.backends.distribute",
    "mirrored-tape": "trainer.backends.distribute_tape",  # ... or through the guide's custom loop (strategy.run)
    "multiworker-tape": "trainer.backends.distribute_tape",
}
BACKENDS = tuple(BACKEND_MODULES)
HOROVOD_BACKENDS = ("horovod", "horovod-tape")  # launched by horovodrun, one process per rank
# one process per TF_CONFIG task, started by ringflow
CLUSTER_BACKENDS = ("multiworker", "multiworker-tape", "parameter-server")


def run(config: Any) -> None:
    """Train with the configured backend in this process (TensorFlow loads here, after the config is read)."""
    backend = config.train.backend
    if backend in ("mirrored", "mirrored-tape"):
        import os
        # oneDNN's CPU kernels fail evaluating on the second logical CPU device (TF 2.21); GPUs are unaffected.
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    module = "trainer.backends.horovod_elastic" if backend == "horovod" and config.train.elastic \
        else BACKEND_MODULES[backend]  # Horovod's elastic loop around the same Keras fit
    importlib.import_module(module).train(config)
