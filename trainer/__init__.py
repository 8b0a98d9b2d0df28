"""The code each training process runs. Never imports Prefect or DVC; TensorFlow is imported lazily.

Importing this package sets the one tf-keras switch of ringflow, before any TensorFlow import: Horovod's
DistributedOptimizer silently skips averaging under Keras 3. Every ringflow process imports it first (`tasks`
does on import), and the processes it launches inherit the setting.
"""
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
