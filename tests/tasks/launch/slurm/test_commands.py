"""Slurm commands fail in one line that names them, also on a machine without Slurm."""
from __future__ import annotations

import pytest

from tasks.launch.slurm.commands import SlurmError, slurm


def test_a_missing_command_is_one_line_saying_this_is_no_slurm_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SlurmError, match=r"^sbatch is not on PATH: this machine is not a Slurm head or login node$"):
        slurm(["sbatch", "--version"])


def test_a_failing_command_is_named_with_its_last_line(tmp_path: object) -> None:
    with pytest.raises(SlurmError, match=r"^ls /nonexistent-slurm-dir: .*No such file or directory"):
        slurm(["ls", "/nonexistent-slurm-dir"])
