"""Horovod for real: 2 ranks over Gloo end with identical weights; a failing rank is named."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.launch import RankFailed, run_streaming
from tasks.params import Params, TrainParams
from tasks.train import horovod_command, rank_environment, trainer_args
from tests.helpers import PYTHON, ROOT, quiet_env


def test_two_ranks_end_with_identical_weights(digits_data: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    params = Params(train=TrainParams(np=2, epochs=2))
    args = trainer_args(params, digits_data, tmp_path, tmp_path / "checkpoints", False)
    command = horovod_command(params, "gloo", args + ["--print-weights-digest"])
    run_streaming(command, rank_environment(None) | quiet_env(), ROOT, lines.append)
    digests = dict(re.findall(r"weights_sha256 rank=(\d) ([0-9a-f]{64})", "\n".join(lines)))
    assert set(digests) == {"0", "1"}, lines[-20:]
    assert digests["0"] == digests["1"]
    assert (tmp_path / "model.weights.h5").is_file()  # rank 0 saved the model
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("ckpt-*.index")) == ["ckpt-1.index", "ckpt-2.index"]
    assert any("epoch 2:" in line and "images_per_sec=" in line for line in lines)


def test_a_failing_rank_is_named_with_its_error(tmp_path: Path) -> None:
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text("import os\nif os.environ['HOROVOD_RANK'] == '1':\n"
                      "    raise ValueError('shard 3 is unreadable')\n")
    command = [str(Path(PYTHON).with_name("horovodrun")), "--gloo", "-np", "2", "-H", "localhost:2",
               PYTHON, str(script)]
    with pytest.raises(RankFailed, match=r"rank 1 failed: ValueError: shard 3 is unreadable"):
        run_streaming(command, quiet_env(), ROOT, lambda line: None)
