"""The training backends: each name's spec (trainer/backend_specs.py) names the module whose `train(config)`
one process runs."""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from trainer.backend_specs import backend_spec


def backend_module(backend: str, elastic: bool) -> ModuleType:
    """The module that trains with `backend` in this process, imported (TensorFlow loads here)."""
    spec = backend_spec(backend)
    if spec.logical_cpu_devices:
        import os
        # oneDNN's CPU kernels fail evaluating on the second logical CPU device (TF 2.21); GPUs are unaffected.
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    return importlib.import_module(spec.module_for(elastic=elastic))


def run(config: Any) -> None:
    """Train with the configured backend in this process (TensorFlow loads here unless it was loaded ahead)."""
    backend_module(config.train.backend, config.train.elastic is not None).train(config)
