"""Where rank 0's epoch metrics go: out as metric lines the launcher reads back and logs (no rank imports MLflow);
beside the launcher's filesystem, into the spool beside the checkpoints first."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainer.config import JobSpec
from trainer.metric_log import SPOOL_FILE, read_spool
from trainer.metrics_sink import metric_sink
from trainer.protocol import METRICS_SPOOL_ENV, parse_metrics_line


def job(tmp_path: Path) -> JobSpec:
    return JobSpec(data_dir=tmp_path, out_dir=tmp_path / "model", checkpoint_dir=tmp_path / "checkpoints",
                   checkpoint_owner="t", augment=False, data_fingerprint="f", metrics_retry_seconds=60)


def printed(capsys: pytest.CaptureFixture[str]) -> list[tuple[int, dict[str, float]] | None]:
    return [parse_metrics_line(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("spooled", [False, True], ids=["another-host", "shared-filesystem"])
def test_the_metrics_leave_as_lines_the_launcher_reads_back_spooled_first_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spooled: bool) -> None:
    if spooled:
        monkeypatch.setenv(METRICS_SPOOL_ENV, "1")
    else:
        monkeypatch.delenv(METRICS_SPOOL_ENV, raising=False)
    sink = metric_sink(job(tmp_path))
    sink(0, {"loss": 0.5, "accuracy": 0.75})
    sink(1, {"loss": 0.25})
    assert printed(capsys) == [(0, {"loss": 0.5, "accuracy": 0.75}), (1, {"loss": 0.25})]
    in_spool = [spooled_epoch[:2] for spooled_epoch in read_spool(tmp_path / "checkpoints" / SPOOL_FILE)]
    assert in_spool == ([(0, {"loss": 0.5, "accuracy": 0.75}), (1, {"loss": 0.25})] if spooled else [])


def test_a_rank_reporting_its_metrics_imports_no_mlflow(tmp_path: Path) -> None:
    import subprocess
    code = ("import sys; from pathlib import Path; from trainer.config import JobSpec; "
            "from trainer.metrics_sink import metric_sink; "
            f"metric_sink(JobSpec(data_dir=Path({str(tmp_path)!r}), out_dir=Path({str(tmp_path)!r}), "
            f"checkpoint_dir=Path({str(tmp_path)!r}), checkpoint_owner='t', augment=False, data_fingerprint='f', "
            "metrics_retry_seconds=60))(0, {'loss': 0.5}); "
            "assert 'mlflow' not in sys.modules, 'mlflow imported'")
    done = subprocess.run([sys.executable, "-c", code], env={"RINGFLOW_METRICS_SPOOL": "1", "PATH": "/usr/bin"},
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
