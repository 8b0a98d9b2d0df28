"""Ranks started ahead of the training step: a rank waits for its job's configuration and ends by itself when the
process that started it is gone; a job ahead that is not the one the training step plans is stopped, never used.
(A whole run trained by its ranks started ahead: tests/flows/test_pipeline.py; Ctrl-C while they wait:
tests/flows/test_run_integrity.py.)"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

from tasks.launch import ahead
from tasks.params import Params
from tasks.paths import ROOT
from trainer.ahead import GONE_EXIT
from trainer.config import TrainParams

WAITER = "import sys; from pathlib import Path; from trainer.ahead import wait_for_config; " \
         "wait_for_config(Path(sys.argv[1]), int(sys.argv[2])); print('config found')"


def waiting(config_file: Path, launcher_pid: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WAITER, str(config_file), str(launcher_pid)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_rank_ahead_reads_its_config_once_the_file_is_there(tmp_path: Path) -> None:
    config_file = tmp_path / "trainer_config.json"
    rank = waiting(config_file, psutil.Process().pid)
    time.sleep(0.5)
    assert rank.poll() is None  # still waiting
    config_file.write_text("{}")
    assert rank.communicate(timeout=30)[0].strip() == "config found" and rank.returncode == 0


def test_a_rank_ahead_ends_by_itself_when_its_launcher_is_gone(tmp_path: Path) -> None:
    launcher = subprocess.Popen(["sleep", "1"])
    rank = waiting(tmp_path / "trainer_config.json", launcher.pid)
    launcher.wait()
    said = rank.communicate(timeout=30)[0]
    assert rank.returncode == GONE_EXIT and "no job came for this process started ahead" in said


def job_tree(roots: list[psutil.Process]) -> list[int]:
    return [process.pid for root in roots for process in [root, *root.children(recursive=True)]]


def command_lines(pids: list[int]) -> list[str]:
    lines = []
    for pid in pids:
        try:
            lines.append(" ".join(psutil.Process(pid).cmdline()))
        except psutil.Error:  # ended meanwhile
            continue
    return lines


def test_a_job_ahead_that_is_not_the_planned_one_is_stopped_and_never_taken(tmp_path: Path) -> None:
    params = Params(train=TrainParams(np=1, controller="gloo"))
    ahead.start_ranks_ahead(params, tmp_path)
    (started,) = ahead._AHEAD
    rank_pids = job_tree(started.job.roots)
    deadline = time.monotonic() + 60
    while not any("--ahead-of" in command for command in command_lines(rank_pids[1:])):
        assert time.monotonic() < deadline, "horovodrun started no rank"
        time.sleep(0.1)
        rank_pids = job_tree(started.job.roots)
    config_file = tmp_path / "planned.json"
    config_file.write_text("{}")
    other = Params(train=TrainParams(np=1, controller="gloo", stall_timeout_seconds=7))  # another horovodrun line
    assert ahead.take_ranks_ahead(lambda path: ahead.ahead_plan(other, "gloo", path), config_file) is None
    assert not ahead._AHEAD and not list(tmp_path.glob("job-*"))
    assert not [pid for pid in rank_pids if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_the_job_files_of_a_run_whose_process_is_gone_are_removed_when_the_next_starts(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f"job-{gone.pid}-abc").mkdir()
    (tmp_path / f"job-{psutil.Process().pid}-def").mkdir()  # a run of a live process keeps its files
    ahead.remove_stale_folders(tmp_path)
    assert [folder.name for folder in tmp_path.iterdir()] == [f"job-{psutil.Process().pid}-def"]
