"""The test helpers' private workspaces: what a user's runs left in the checkout does not reach them."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import CODE_LINKS, RUN_RECORDS, WORKSPACE_FILES, commit_all, copy_checkout, make_workspace

COMMITTED_LOCK = "schema: '2.0'\nstages: {}\n"
RUN_LOCK = "schema: '2.0'\nstages:\n  train:\n    outs: [outputs/model]\n"  # what `make run` records


@pytest.fixture
def checkout_after_a_run(tmp_path: Path) -> Path:
    """A checkout whose dvc.lock a user's run rewrote after the last commit."""
    checkout = tmp_path / "checkout"
    for name in (*WORKSPACE_FILES, *RUN_RECORDS):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(COMMITTED_LOCK if name in RUN_RECORDS else f"{name}\n")
    (checkout / ".gitignore").write_text(".venv/\n")
    for name in CODE_LINKS:
        (checkout / name).mkdir()
        (checkout / name / "module.py").write_text("CODE = 1\n")
    commit_all(checkout, "the project")
    (checkout / "dvc.lock").write_text(RUN_LOCK)
    (checkout / "params.yaml").write_text("edited: true\n")  # a user's uncommitted change is what they test
    return checkout


def test_a_workspace_takes_the_committed_dvc_lock_links_the_code_and_copies_the_rest(
        checkout_after_a_run: Path, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "workspace", source=checkout_after_a_run, prepared=False)
    assert (workspace / "dvc.lock").read_text() == COMMITTED_LOCK
    assert (workspace / "params.yaml").read_text() == "edited: true\n"
    assert all((workspace / name).resolve() == checkout_after_a_run / name for name in CODE_LINKS)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=workspace, capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout == ""


def test_a_copied_checkout_takes_the_committed_dvc_lock(checkout_after_a_run: Path, tmp_path: Path) -> None:
    copied = copy_checkout(tmp_path / "copy", source=checkout_after_a_run, prepared=False)
    assert (copied / "dvc.lock").read_text() == COMMITTED_LOCK
    assert (copied / "tasks" / "module.py").read_text() == "CODE = 1\n"
    assert (copied / "params.yaml").read_text() == "edited: true\n"
    assert (copied / ".venv").resolve() == checkout_after_a_run / ".venv"
