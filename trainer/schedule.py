"""Scale-aware learning rate: linear scaling by replicas with a linear warmup (Goyal et al., as NVIDIA DLI's
multi-GPU notebooks teach it)."""
from __future__ import annotations

from typing import Any

import tensorflow as tf


def scaled_rates(base: float, replicas: int, scale: bool) -> tuple[float, float]:
    """(warmup start, target): the target is base x replicas when scaling; warmup starts from the
    one-replica rate (or from zero when there is nothing to scale)."""
    target = base * replicas if scale else base
    return (base if target > base else 0.0), target


@tf.keras.utils.register_keras_serializable(package="ringflow")
class WarmupSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Linear ramp from `initial` to `target` over `warmup_steps` optimizer steps, then constant."""

    def __init__(self, initial: float, target: float, warmup_steps: int) -> None:
        super().__init__()
        self.initial, self.target, self.warmup_steps = float(initial), float(target), int(warmup_steps)

    def __call__(self, step: Any) -> Any:
        if self.warmup_steps <= 0:
            return tf.constant(self.target, tf.float32)
        progress = tf.minimum(tf.cast(step, tf.float32) / float(self.warmup_steps), 1.0)
        return self.initial + (self.target - self.initial) * progress

    def get_config(self) -> dict[str, Any]:
        return {"initial": self.initial, "target": self.target, "warmup_steps": self.warmup_steps}


def current_rate(optimizer: Any) -> float:
    """The learning rate of the optimizer's last step (a schedule evaluated at that step)."""
    rate = optimizer.learning_rate
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        rate = rate(tf.maximum(optimizer.iterations - 1, 0))
    return float(tf.keras.backend.get_value(rate))
