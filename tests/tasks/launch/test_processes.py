"""Running a job's processes: a failing rank is named with its error."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.processes import RankFailed, run_streaming
from tests.helpers import PYTHON, ROOT, quiet_env

pytestmark = pytest.mark.slow  # real horovodrun


def test_a_failing_rank_is_named_with_its_error(tmp_path: Path) -> None:
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text("import os\nif os.environ['HOROVOD_RANK'] == '1':\n"
                      "    raise ValueError('shard 3 is unreadable')\n")
    command = [str(Path(PYTHON).with_name("horovodrun")), "--gloo", "-np", "2", "-H", "localhost:2",
               PYTHON, str(script)]
    with pytest.raises(RankFailed, match=r"rank 1 failed: ValueError: shard 3 is unreadable"):
        run_streaming(command, quiet_env(), ROOT, lambda line: None)
