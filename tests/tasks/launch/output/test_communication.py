"""The line and the tag a training gets when averaging its gradients took a high share of each step."""
from __future__ import annotations

from tasks.launch.output.communication import HIGH_SHARE, communication_advice, communication_figures


def summary(share: float) -> dict:
    return {"world_size": 2, "communication": {"gradient_bytes": 4 * 2**20, "allreduce_ms": 10 * share,
                                               "step_ms": 10.0, "allreduce_share": share}}


def test_a_high_share_is_one_line_with_what_would_help() -> None:
    advice = communication_advice(summary(0.4), batch_size=32)
    assert advice == ("communication: averaging the gradients (4.0 MB) took 4.0 ms of each 10.0 ms step (40%) across "
                      "2 ranks; less of it with a larger batch per replica (train.batch_size 32 -> 128), fewer ranks "
                      "per host, fp16 gradients (train.fp16_allreduce) or gradients accumulated over steps in the "
                      "model's own train_step")


def test_a_low_share_or_none_measured_says_nothing() -> None:
    assert communication_advice(summary(HIGH_SHARE / 2), batch_size=32) is None
    small = summary(0.5)
    small["communication"]["gradient_bytes"] = 5120  # a small model's: in KB, not "0.0 MB"
    advice = communication_advice(small, batch_size=32) or ""
    assert advice.startswith("communication: averaging the gradients (5.0 KB) took")
    assert communication_advice({"world_size": 1}, batch_size=32) is None
    assert communication_figures({"world_size": 1}) == {}
    assert communication_figures(summary(0.1)) == {"allreduce_ms": 1.0, "step_ms": 10.0, "allreduce_share": 0.1}
