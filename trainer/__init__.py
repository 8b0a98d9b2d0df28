"""The code each Horovod rank runs. Never imports Prefect or DVC; TensorFlow is imported lazily."""
import os

# tf-keras, not Keras 3: Horovod's DistributedOptimizer silently skips averaging under Keras 3.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
