"""Optional libraries that tf-keras imports whenever they are installed, for features a process that trains or
loads a model never uses: pandas (DataFrames given to fit) and SciPy (the transforms of tf-keras's image
preprocessing). The project's environment has them for MLflow and scikit-learn; such a process marks them absent
as Python documents it (`sys.modules[name] = None`: importing it raises ImportError) before it imports TensorFlow,
and tf-keras goes on without them. Measured: importing Horovod and TensorFlow took 2.7 s of a core with them,
2.1 s without; every rank, every process start pays it."""
from __future__ import annotations

import sys

UNUSED_WHEN_TRAINING = ("pandas", "scipy")


def skip_unused_libraries() -> None:
    """Mark the libraries absent in this process, unless something imported them already."""
    for name in UNUSED_WHEN_TRAINING:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
