"""The rank-line protocol: every line a training process prints for the launcher reads back as it was written,
also behind the launcher's `[rank]<stdout>:` tag."""
from __future__ import annotations

import sys

import pytest

from trainer import protocol

TAG = "[1]<stdout>:"


def test_each_line_reads_back_what_was_written() -> None:
    assert protocol.parse_placed(protocol.placed_line(1, 4, "h2", 4321)) == (1, 4, "h2")
    assert protocol.placed_pid(protocol.placed_line(1, 4, "h2", 4321)) == 4321
    assert protocol.resumed_epochs(TAG + protocol.resumed_line(7)) == [7]
    assert protocol.elastic_starts(TAG + protocol.elastic_start_line(2, 3)) == [(2, 3)]
    digest = "ab" * 32
    assert protocol.weights_digests(TAG + protocol.weights_line("rank=1", digest)) == [("rank=1", digest)]
    assert protocol.parse_epoch_line(protocol.epoch_line(0, {"loss": 0.5, "accuracy": 0.25})) == \
        (1, {"accuracy": 0.25, "loss": 0.5})
    assert protocol.parse_metrics_line(TAG + protocol.metrics_line(3, {"loss": 0.125})) == (3, {"loss": 0.125})


def test_other_lines_are_none_of_them_and_a_cut_metrics_line_says_so() -> None:
    assert protocol.parse_placed("rank 0 of 2 on") is None and protocol.parse_metrics_line("epoch 1: loss=1") is None
    assert protocol.parse_epoch_line("epochs 1: x") is None and protocol.resumed_epochs("resuming soon") == []
    with pytest.raises(protocol.CutShort):
        protocol.parse_metrics_line(protocol.metrics_line(3, {"loss": 0.125})[:-5])
    assert protocol.is_heartbeat_text(protocol.HEARTBEAT_LINE) and not protocol.is_heartbeat_text("heartbeat")


def test_the_protocol_loads_no_tensorflow() -> None:
    import subprocess
    code = "import sys, trainer.protocol; print('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
