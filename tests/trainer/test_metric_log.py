"""The metric spool: one line per epoch on disk; a line cut short by a killed process is left out."""
from __future__ import annotations

from pathlib import Path

from trainer.metric_log import append_to_spool, read_spool


def test_a_spool_line_cut_short_by_a_killed_process_is_left_out(tmp_path: Path) -> None:
    spool = tmp_path / "checkpoints" / "spool.jsonl"
    append_to_spool(spool, 0, {"loss": 0.5}, 1000)
    with open(spool, "a") as handle:
        handle.write('{"epoch": 1, "metr')
    assert read_spool(spool) == [(0, {"loss": 0.5}, 1000)] and read_spool(tmp_path / "none.jsonl") == []
