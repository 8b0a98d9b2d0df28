"""--dry-run: prepare and preflight, then the launch plan and every rank's share of the data; nothing trains."""
from __future__ import annotations

from pathlib import Path

from tests.helpers import PYTHON, copy_checkout, quiet_env, run


def test_a_dry_run_prints_the_launch_and_data_plans_and_trains_nothing(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    done = run([PYTHON, "-m", "flows.pipeline", "--dry-run", "--set", "np=9", "--set", "batch_size=16"], repo,
               quiet_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    launch = lines[lines.index("launch:") + 1]
    assert launch.startswith("rank 0 on localhost, ") and "rank 8 on localhost: " in launch
    assert "horovodrun --mpi -np 9 -H localhost:9" in launch  # auto: MPI, built by set-up and "-m trainer --config" in launch
    plan = lines[lines.index("data:") + 1:]
    assert len(plan) == 9 and all(line.startswith(f"rank {rank}: ") for rank, line in enumerate(plan))
    records = [int(line.split()[2]) for line in plan]
    assert sum(records) == 1257 and max(records) - min(records) <= 1
    assert all(", 8 steps of 16, " in line for line in plan)
    assert not (repo / "mlruns").exists() and not (repo / "outputs" / "runs").exists()
