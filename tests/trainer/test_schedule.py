"""The learning rate: scaled linearly by replicas, warmed up linearly from the one-replica rate (or from zero when
nothing is scaled), the rate of the last step as reported, and a schedule that survives Keras serialization."""
from __future__ import annotations

import pytest
import tensorflow as tf

from trainer.schedule import WarmupSchedule, current_rate, scaled_rates


def test_scaling_multiplies_by_the_replicas_and_warms_up_from_the_one_replica_rate() -> None:
    assert scaled_rates(0.001, 4, True) == (0.001, 0.004)
    assert scaled_rates(0.001, 4, False) == (0.0, 0.001)  # nothing scaled: from zero
    assert scaled_rates(0.001, 1, True) == (0.0, 0.001)  # one replica: nothing to scale


def test_the_warmup_ramps_linearly_then_holds_the_target() -> None:
    schedule = WarmupSchedule(0.001, 0.004, 100)
    assert [round(float(schedule(step)), 6) for step in (0, 50, 100, 500)] == [0.001, 0.0025, 0.004, 0.004]
    assert float(WarmupSchedule(0.001, 0.004, 0)(0)) == pytest.approx(0.004)  # no warmup: the target at once


def test_the_reported_rate_is_the_schedules_at_the_last_step_taken() -> None:
    variable = tf.Variable(1.0)
    optimizer = tf.keras.optimizers.legacy.Adam(WarmupSchedule(0.0, 1.0, 10))
    assert current_rate(optimizer) == 0.0  # no step yet: step 0's
    for _ in range(3):
        optimizer.apply_gradients([(tf.constant(1.0), variable)])
    assert current_rate(optimizer) == pytest.approx(0.2)  # steps 0, 1, 2 taken
    assert current_rate(tf.keras.optimizers.legacy.Adam(0.01)) == pytest.approx(0.01)  # a plain rate as it is


def test_an_optimizer_on_the_schedule_survives_keras_serialization() -> None:
    optimizer = tf.keras.optimizers.legacy.Adam(WarmupSchedule(0.001, 0.004, 100))
    restored = tf.keras.optimizers.deserialize(tf.keras.optimizers.serialize(optimizer))
    assert isinstance(restored.learning_rate, WarmupSchedule)
    assert restored.learning_rate.get_config() == {"initial": 0.001, "target": 0.004, "warmup_steps": 100}
