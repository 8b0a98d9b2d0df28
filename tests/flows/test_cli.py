"""The command line's helpers: a process count for the scaling flow, also as whole Slurm nodes."""
from __future__ import annotations

import pytest

from flows.cli import with_np
from tasks.params import ParamsError, load_params


def test_another_process_count_keeps_everything_else() -> None:
    params = load_params({"train.epochs": 3})
    assert with_np(params, 4).train.np == 4 and with_np(params, 4).train.epochs == 3


def test_under_slurm_a_process_count_is_whole_nodes_or_one_node_of_fewer() -> None:
    params = load_params({"train.scheduler": "slurm", "slurm.nodes": 2, "slurm.tasks_per_node": 4})
    shapes = {np: (shaped.slurm.nodes, shaped.slurm.tasks_per_node, shaped.train.np)
              for np in (1, 2, 4, 8) for shaped in [with_np(params, np)]}
    assert shapes == {1: (1, 1, 1), 2: (1, 2, 2), 4: (1, 4, 4), 8: (2, 4, 8)}
    with pytest.raises(ParamsError, match="np 6 is not a whole number of nodes of slurm.tasks_per_node 4"):
        with_np(params, 6)
