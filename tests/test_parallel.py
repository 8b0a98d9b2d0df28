"""How make test spreads the suite: the modules that use the session's pipeline run share one worker (it is made
once), the test clusters' modules keep their cluster's group."""
from __future__ import annotations

from pathlib import Path

from tests.parallel import CLUSTER_GROUP, ROOT, group_of, group_of_module


def test_every_module_that_uses_the_session_s_pipeline_run_is_in_one_group() -> None:
    users = [str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
             if path != Path(__file__) and "pipeline_run: PipelineRun" in path.read_text()]
    assert len(users) >= 2 and len({group_of_module(module) for module in users}) == 1, users


def test_a_cluster_s_modules_share_its_group_and_other_modules_are_their_own() -> None:
    assert group_of("tests/tasks/launch/test_slurm_cluster.py::test_x") == CLUSTER_GROUP + "h"
    assert group_of("tests/tasks/launch/test_cluster.py::test_x") == CLUSTER_GROUP + "g"
    assert group_of("tests/trainer/test_data.py::test_x") == "tests/trainer/test_data.py"
