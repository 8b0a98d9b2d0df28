"""Preflight of the remote hosts: one ssh call each, and every problem one line naming the host."""
from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from tasks.launch.remote import host_probe
from tasks.launch.remote import probe as probe_module
from tasks.launch.remote.probe import host_problem, interface_problem, probe, probe_remote_hosts, remote_host_problem
from tasks.paths import ROOT

HERE = sys.version.split()[0]


def answer(**changes: Any) -> dict:
    """A host's answers as host_probe.py gives them: this machine's Python and trainer, 4 cores, Horovod built."""
    answers = {"python": HERE, "trainer": host_probe.trainer_digest(ROOT), "cores": 4, "gpus": 0,
               "horovod": {"gloo": True, "mpi": False}, "sees_token": False, "interfaces": ["eth0", "lo"],
               "data_key": ""}
    return answers | changes


def test_hosts_that_are_this_machine_are_not_probed(tmp_path: Path) -> None:
    hosts = ["localhost", "127.0.0.1", socket.gethostname(), "localhost"]
    assert probe_remote_hosts(hosts, tmp_path, tmp_path / "token") == {}


def test_a_host_ssh_cannot_reach_is_its_problem(tmp_path: Path) -> None:
    problem = probe("nosuchhost.invalid", tmp_path, tmp_path / "token")
    assert isinstance(problem, str)
    assert problem.startswith("host nosuchhost.invalid cannot be reached by ssh without a password: "
                              "ssh: Could not resolve hostname nosuchhost.invalid")


def test_a_host_that_does_not_answer_in_time_is_its_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "PROBE_SECONDS", 0.01)
    assert probe("localhost", tmp_path, tmp_path / "token") == \
        "host localhost did not answer within 0.01 s (the preflight probe)"


def test_the_remote_hosts_are_probed_once_each(tmp_path: Path) -> None:
    answers = probe_remote_hosts(["localhost", "nosuchhost.invalid", "nosuchhost.invalid"], tmp_path,
                                 tmp_path / "token")
    assert list(answers) == ["nosuchhost.invalid"] and "cannot be reached by ssh" in answers["nosuchhost.invalid"]


def test_a_host_like_this_machine_has_no_problem() -> None:
    assert host_problem("h", 4, answer(), horovod=True) is None


@pytest.mark.parametrize(("changes", "problem"), [
    ({"python": "3.9.1"}, f"host h runs Python 3.9.1 at {sys.executable}, this machine {HERE}"),
    ({"trainer": ""}, f"host h: ringflow's trainer at {ROOT} is missing"),
    ({"trainer": "0" * 64}, f"host h: ringflow's trainer at {ROOT} differs from this machine's"),
    ({"horovod": {"error": "ImportError: libmpi.so"}}, "host h: Horovod cannot be imported there (ImportError: "
                                                        "libmpi.so)"),
    ({"cores": 3}, "host h has 3 cores for the 4 slots asked (train.hosts / train.hostfile)"),
    ({"cores": 64, "gpus": 2}, "host h has 2 GPUs for the 4 slots asked (train.hosts / train.hostfile)"),
])
def test_what_keeps_a_host_from_its_slots_is_one_line(changes: dict, problem: str) -> None:
    assert host_problem("h", 4, answer(**changes), horovod=True) == problem


def test_the_first_problem_found_is_the_one_said() -> None:
    """The Python before the trainer before Horovod before the slots."""
    everything_wrong = answer(python="3.9.1", trainer="", horovod={"error": "x"}, cores=1)
    assert host_problem("h", 4, everything_wrong, horovod=True).startswith("host h runs Python 3.9.1")
    assert host_problem("h", 4, answer(trainer="", horovod={"error": "x"}, cores=1), horovod=True).endswith(
        "is missing")


def test_horovod_matters_only_to_a_horovod_job() -> None:
    assert host_problem("h", 4, answer(horovod={"error": "ImportError: x"}), horovod=False) is None


def test_gpus_are_the_slots_of_a_gpu_host() -> None:
    assert host_problem("h", 2, answer(cores=1, gpus=2), horovod=True) is None


def test_the_first_probed_host_with_a_problem_is_the_one_said() -> None:
    unreachable = "host b cannot be reached by ssh without a password: ssh: no"
    answers = {"a": answer(), "b": unreachable, "c": answer(cores=1)}
    assert remote_host_problem({"a": 4, "c": 4}, True, answers) == unreachable
    answers = {"a": answer(), "c": answer(cores=1), "b": unreachable}
    assert remote_host_problem({"a": 4, "c": 4}, True, answers) == "host c has 1 cores for the 4 slots asked " \
                                                                  "(train.hosts / train.hostfile)"
    assert remote_host_problem({"a": 4, "c": 1}, True, {"a": answer(), "c": answer(cores=1)}) is None
    assert remote_host_problem({}, True, {}) is None


def test_no_interface_asked_is_no_problem() -> None:
    assert interface_problem(None, ["localhost", "h"], {"h": answer(interfaces=[])}) is None


def test_an_interface_every_host_has_is_no_problem() -> None:
    assert interface_problem("lo", ["localhost", "h", "h"], {"h": answer(interfaces=["eth0", "lo"])}) is None


def test_a_remote_host_without_the_interface_is_named() -> None:
    problem = interface_problem("ib0", ["h", "g"], {"h": answer(interfaces=["eth0", "ib0"]),
                                                    "g": answer(interfaces=["eth0", "lo"])})
    assert problem == "train.network_interface: host g has no interface ib0 (it has eth0, lo)"


def test_this_machine_is_checked_with_its_own_interfaces() -> None:
    """This machine is not probed: its interfaces are read here."""
    here = host_probe.interface_names()
    missing = "rf-nosuch0"
    assert missing not in here
    assert interface_problem(missing, ["localhost", "h"], {"h": answer(interfaces=[missing])}) == \
        f"train.network_interface: host localhost has no interface {missing} (it has {', '.join(here)})"


def test_this_machine_probed_as_a_host_has_no_problem(tmp_path: Path) -> None:
    """The whole probe once, run here as a host runs it (about 3 s: Horovod's import is TensorFlow's)."""
    token_file = tmp_path / "token"
    token_file.write_text("here\n")
    answers = probe("localhost", tmp_path, token_file)
    assert isinstance(answers, dict), answers
    assert answers["sees_token"] is True and "error" not in answers["horovod"]
    assert host_problem("localhost", 1, answers, horovod=True) is None


def test_horovod_s_library_is_checked_without_importing_tensorflow(tmp_path: Path) -> None:
    """This machine's Horovod loads; a copy of its library where TensorFlow's libraries are not is named for the
    one it misses (what importing horovod.tensorflow fails on), and neither answer imports TensorFlow."""
    import shutil
    import subprocess
    script = ROOT / "tasks" / "launch" / "remote" / "host_probe.py"
    asked = [sys.executable, "-c", f"import json, runpy, sys; found = runpy.run_path('{script}')['horovod_build'](); "
                                   "print(json.dumps([found, 'tensorflow' in sys.modules]))"]
    here = subprocess.run(asked, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert here.stdout.strip().splitlines()[-1].startswith('[{"library": ') and here.stdout.strip().endswith("false]")
    site = tmp_path / "site"
    (site / "horovod" / "tensorflow").mkdir(parents=True)
    (site / "tensorflow").mkdir()
    for package in ("horovod", "tensorflow"):
        (site / package / "__init__.py").write_text("")
    library = next((host_probe.package_dir("horovod") / "tensorflow").glob("mpi_lib*.so"))  # type: ignore[operator]
    shutil.copy(library, site / "horovod" / "tensorflow" / library.name)
    there = subprocess.run(asked, capture_output=True, text=True, check=True, cwd=tmp_path,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)})
    assert "libtensorflow_framework.so.2" in there.stdout and '"error": "OSError: ' in there.stdout
