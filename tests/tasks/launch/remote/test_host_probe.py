"""The preflight probe as a host runs it: its Python reading the script on standard input, one JSON line out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.launch.remote import host_probe
from tests.helpers import ROOT

SCRIPT = Path(host_probe.__file__).read_text()


def probe_answer(checkout: Path, data_dir: Path, token_file: Path) -> dict:
    """The probe's answers, run by this Python without its site-packages (-S): the probe needs nothing but the
    standard library, and Horovod's import (TensorFlow's, seconds) is left to the slow tier."""
    done = subprocess.run([sys.executable, "-S", "-", str(checkout), str(data_dir), str(token_file)], input=SCRIPT,
                          capture_output=True, text=True, check=True, timeout=60)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0])


@pytest.fixture
def fake_checkout(tmp_path: Path) -> Path:
    """A checkout whose trainer is two small modules (and a file that is not code)."""
    checkout = tmp_path / "checkout"
    (checkout / "trainer" / "sub").mkdir(parents=True)
    (checkout / "trainer" / "__init__.py").write_text("")
    (checkout / "trainer" / "sub" / "fit.py").write_text("EPOCHS = 1\n")
    (checkout / "trainer" / "notes.txt").write_text("not code\n")
    return checkout


def test_a_host_holding_the_data_and_seeing_the_token_says_so(fake_checkout: Path, tmp_path: Path) -> None:
    data_dir, token_file = tmp_path / "data", tmp_path / "token"
    data_dir.mkdir()
    (data_dir / host_probe.SHIPPED_MARK).write_text("0123abcd\n")
    token_file.write_text("here\n")
    answer = probe_answer(fake_checkout, data_dir, token_file)
    assert answer["sees_token"] is True and answer["data_key"] == "0123abcd"
    assert answer["trainer"] == host_probe.trainer_digest(fake_checkout) != host_probe.trainer_digest(ROOT)
    assert answer["python"] == sys.version.split()[0] and answer["cores"] == os.cpu_count()
    assert "lo" in answer["interfaces"] and answer["gpus"] == host_probe.gpu_count()


def test_a_host_without_the_checkout_data_or_token_says_so(tmp_path: Path) -> None:
    answer = probe_answer(tmp_path / "nothing", tmp_path / "no-data", tmp_path / "no-token")
    assert (answer["trainer"], answer["data_key"], answer["sees_token"]) == ("", "", False)


def test_a_host_whose_horovod_cannot_be_imported_gives_the_reason(tmp_path: Path) -> None:
    answer = probe_answer(tmp_path, tmp_path, tmp_path / "token")
    assert answer["horovod"] == {"error": "ModuleNotFoundError: No module named 'horovod'"}


def test_the_real_checkouts_trainer_is_recognised(tmp_path: Path) -> None:
    assert probe_answer(ROOT, tmp_path, tmp_path / "token")["trainer"] == host_probe.trainer_digest(ROOT)


def test_the_digest_covers_the_code_its_paths_and_nothing_else(fake_checkout: Path) -> None:
    before = host_probe.trainer_digest(fake_checkout)
    assert len(before) == 64
    (fake_checkout / "trainer" / "notes.txt").write_text("edited\n")
    assert host_probe.trainer_digest(fake_checkout) == before
    (fake_checkout / "trainer" / "sub" / "fit.py").rename(fake_checkout / "trainer" / "sub" / "fit2.py")
    renamed = host_probe.trainer_digest(fake_checkout)
    assert renamed != before
    (fake_checkout / "trainer" / "sub" / "fit2.py").write_text("EPOCHS = 2\n")
    assert host_probe.trainer_digest(fake_checkout) not in (before, renamed)


def test_read_text_is_stripped_or_empty(tmp_path: Path) -> None:
    (tmp_path / "mark").write_text("  key \n")
    assert host_probe.read_text(tmp_path / "mark") == "key"
    assert host_probe.read_text(tmp_path / "missing") == ""
    assert host_probe.read_text(tmp_path) == ""  # a directory: unreadable as text, not an error


def test_the_hosts_interfaces_include_loopback() -> None:
    names = host_probe.interface_names()
    assert "lo" in names and names == sorted(names)
