"""Horovod's build (`horovodrun --check-build`, as set-up recorded it) and the controller a job uses."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tasks.launch import horovod_build
from tasks.launch.errors import PreflightError
from tasks.launch.horovod_build import CHECK_BUILD_CACHE, check_build_report, check_horovod, controller
from trainer.config import ElasticParams, TrainParams


def build_report(frameworks: tuple[str, ...] = ("TensorFlow",), controllers: tuple[str, ...] = ("MPI", "Gloo"),
                 operations: tuple[str, ...] = ("MPI", "Gloo")) -> str:
    """A report laid out as `horovodrun --check-build` prints it, with the given items built."""
    def section(title: str, names: tuple[str, ...], built: tuple[str, ...]) -> str:
        return f"{title}:\n" + "".join(f"    [{'X' if name in built else ' '}] {name}\n" for name in names)
    return ("Horovod v0.28.1:\n\n" + section("Available Frameworks", ("TensorFlow", "PyTorch"), frameworks) + "\n"
            + section("Available Controllers", ("MPI", "Gloo"), controllers) + "\n"
            + section("Available Tensor Operations", ("NCCL", "MPI", "Gloo"), operations))


@pytest.fixture()
def with_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An executable mpirun first on PATH (whether the machine has one or not)."""
    mpirun = tmp_path / "bin" / "mpirun"
    mpirun.parent.mkdir()
    mpirun.write_text("#!/bin/sh\nexit 0\n")
    mpirun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{mpirun.parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture()
def without_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


@pytest.fixture()
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where check_build_report reads set-up's record (a file of the test's own)."""
    cache = tmp_path / "check-build"
    monkeypatch.setattr(horovod_build, "CHECK_BUILD_CACHE", cache)
    return cache


def test_set_up_records_the_build_beside_this_interpreter_s_environment() -> None:
    assert CHECK_BUILD_CACHE.parent == Path(sys.executable).parent.parent
    assert CHECK_BUILD_CACHE.is_file(), "scripts/setup.sh records `horovodrun --check-build` here"
    assert "Available Controllers" in check_build_report() and "[X] TensorFlow" in check_build_report()


def test_the_recorded_report_is_read_rather_than_running_horovodrun(recorded: Path) -> None:
    recorded.write_text("a recorded report")
    assert check_build_report() == "a recorded report"


def test_a_controller_asked_for_is_the_one_used(with_mpirun: None) -> None:
    assert controller(TrainParams(controller="gloo"), build_report()) == "gloo"
    assert controller(TrainParams(controller="mpi"), build_report(controllers=("Gloo",))) == "mpi"


def test_auto_takes_mpi_when_built_and_mpirun_is_on_path(with_mpirun: None) -> None:
    assert controller(TrainParams(), build_report()) == "mpi"


def test_auto_takes_gloo_without_mpirun(without_mpirun: None) -> None:
    assert shutil.which("mpirun") is None
    assert controller(TrainParams(), build_report()) == "gloo"


def test_auto_takes_gloo_when_horovod_has_no_mpi(with_mpirun: None) -> None:
    assert controller(TrainParams(), build_report(controllers=("Gloo",), operations=("Gloo",))) == "gloo"


def test_elastic_mode_runs_on_gloo_even_with_mpi(with_mpirun: None) -> None:
    train = TrainParams(np=2, elastic=ElasticParams(min_np=1, max_np=2))
    assert controller(train, build_report()) == "gloo"


def test_a_build_with_what_the_job_needs_passes_and_names_its_controller(recorded: Path, with_mpirun: None) -> None:
    recorded.write_text(build_report())
    assert check_horovod(TrainParams()) == "mpi"
    assert check_horovod(TrainParams(controller="gloo")) == "gloo"


def test_horovod_without_tensorflow_is_refused(recorded: Path, with_mpirun: None) -> None:
    recorded.write_text(build_report(frameworks=("PyTorch",)))
    with pytest.raises(PreflightError, match=r"^Horovod is not built with TensorFlow \(run `make setup`\)$"):
        check_horovod(TrainParams())


def test_a_controller_horovod_lacks_is_refused(recorded: Path, with_mpirun: None) -> None:
    recorded.write_text(build_report(controllers=("MPI",), operations=("MPI",)))
    with pytest.raises(PreflightError, match="^Horovod is not built with the GLOO controller$"):
        check_horovod(TrainParams(controller="gloo"))


def test_mpi_asked_for_without_mpirun_is_refused(recorded: Path, without_mpirun: None) -> None:
    recorded.write_text(build_report())
    with pytest.raises(PreflightError, match="^controller mpi needs mpirun on PATH$"):
        check_horovod(TrainParams(controller="mpi"))


def test_jit_compile_is_refused_for_horovod(recorded: Path, with_mpirun: None) -> None:
    recorded.write_text(build_report())
    with pytest.raises(PreflightError, match="^jit_compile needs Horovod's XLA ops, which this build leaves out: "
                                             "use a tf.distribute backend$"):
        check_horovod(TrainParams(jit_compile=True))
