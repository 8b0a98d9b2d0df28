"""Horovod imported against tf-keras: Keras 3 is never loaded in a rank, and Horovod's callbacks get tf-keras's
backend."""
from __future__ import annotations

import subprocess

from tests.helpers import PYTHON, ROOT, quiet_env

RANK_IMPORTS = """
import sys
import trainer
from trainer.backends import horovod_elastic, horovod_fit, horovod_tape
from trainer.backends.horovod_keras import hvd
print("keras 3 loaded:", "keras" in sys.modules)
print("callbacks' backend:", hvd.callbacks.K.__name__)
"""


def test_a_rank_s_horovod_imports_load_no_keras_3() -> None:
    done = subprocess.run([PYTHON, "-c", RANK_IMPORTS], cwd=ROOT, env=quiet_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["keras 3 loaded: False", "callbacks' backend: tf_keras.backend"]
