"""How much of a training step the gradients' averaging takes, from the ranks' own timings: after the epochs, every
rank averages a tensor of the model's trainable size a few times (the collective a step ends with, through the same
library, cycle and fusion settings), and the lead sets its time against the steady step the epochs measured. The
summary keeps the figures; the pipeline says when they are high (tasks/launch/output/communication.py)."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from trainer.model_io import steady_images_per_sec

TIMED_AVERAGES = 7  # after one untimed (its negotiation is cached for the rest, as a training's is)


def gradient_elements(model: tf.keras.Model) -> int:
    """How many numbers one step's gradients hold: the model's trainable weights."""
    return int(sum(np.prod(weight.shape) for weight in model.trainable_weights))


def averaging_seconds(elements: int, average: Callable[[tf.Tensor], Any]) -> float:
    """The median seconds of one average over the ranks of a float32 tensor of `elements` numbers (every rank
    calls this at the same point)."""
    tensor = tf.ones([elements], tf.float32)
    average(tensor).numpy()
    times = []
    for _ in range(TIMED_AVERAGES):
        started = time.perf_counter()
        average(tensor).numpy()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measured(model: tf.keras.Model, history: dict[str, list[float]], global_batch: int,
             average: Callable[[tf.Tensor], Any]) -> dict[str, float] | None:
    """The step's figures (every rank averages; the lead's history holds the step time): the gradients' bytes, the
    averaging's and the step's milliseconds, and the averaging's share of the step; None where no step was timed."""
    elements = gradient_elements(model)
    seconds = averaging_seconds(elements, average)
    rate = steady_images_per_sec(history)
    if not rate:
        return None
    step = global_batch / rate
    return {"gradient_bytes": 4 * elements, "allreduce_ms": 1000 * seconds, "step_ms": 1000 * step,
            "allreduce_share": min(1.0, seconds / step)}
