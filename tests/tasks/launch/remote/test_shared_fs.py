"""Shared filesystem or not: a host shares it when it sees the file this machine wrote for this very launch."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tasks.launch.remote import host_probe
from tasks.launch.remote.shared_fs import fresh_token, hosts_without_shared_fs, shared_fs_problem
from tests.helpers import ROOT


def probe_answer(checkout: Path, token_file: Path) -> dict:
    """The probe run as a host runs it (its Python reading the script on standard input; -S: without
    site-packages, so Horovod is not imported, which these tests do not ask about)."""
    done = subprocess.run([sys.executable, "-S", "-", str(checkout), str(checkout / "data"), str(token_file)],
                          input=Path(host_probe.__file__).read_text(), capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_copied_checkout_is_not_taken_for_a_shared_filesystem(tmp_path: Path) -> None:
    """Found by using it: hosts holding an rsync'd copy of the checkout (outputs/ included) carried the head's kept
    id, were taken for a shared filesystem, got nothing shipped, and rank 1 failed on a missing config file."""
    head, copy = tmp_path / "head", tmp_path / "copy"
    (head / "outputs").mkdir(parents=True)
    with fresh_token(head / "outputs") as earlier:
        shutil.copytree(head, copy)  # a copy made during an earlier launch, with that launch's token in it
        assert probe_answer(head, earlier)["sees_token"]
    with fresh_token(head / "outputs") as token_file:
        copied_path = copy / token_file.relative_to(head)  # where the copy's host would look
        answers = {"shared": probe_answer(head, token_file), "copy": probe_answer(copy, copied_path)}
    assert answers["shared"]["sees_token"] and not answers["copy"]["sees_token"]
    assert hosts_without_shared_fs("auto", answers) == ("copy",)
    assert shared_fs_problem(True, answers, ROOT).startswith("host copy does not see this machine's checkout")
    assert not list((head / "outputs").rglob("*-*")) or not token_file.exists()  # the token is gone after


def test_the_probe_names_this_hosts_interfaces(tmp_path: Path) -> None:
    with fresh_token(tmp_path) as token_file:
        assert "lo" in probe_answer(ROOT, token_file)["interfaces"]
