"""Preflight: each launch that would fail is refused with one clear line before anything starts."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.launch.preflight import PreflightError, check_launch
from tasks.params import InputParams, Params, TrainParams


@pytest.mark.parametrize(("train", "inputs", "message"), [
    ({"model": "resnet50"}, {}, "model resnet50 needs inputs of at least 32x32; the data is 8x8"),
    ({"hosts": "nosuchhost.invalid:2"}, {}, "host 'nosuchhost.invalid' does not resolve"),
    ({"network_interface": "nosuchif0"}, {}, "train.network_interface: host localhost has no interface nosuchif0 "
                                             r"\(it has .*lo"),
    ({"np": 3, "hosts": "localhost:2"}, {}, "np 3 exceeds the 2 slots of localhost:2"),
    ({"backend": "multiworker", "np": 3, "hosts": "localhost:2"}, {}, "np 3 exceeds the 2 slots of localhost:2"),
    ({"hostfile": "/no/hostfile"}, {}, "hostfile /no/hostfile does not exist"),
    ({"jit_compile": True}, {}, "jit_compile needs Horovod's XLA ops"),
    ({"controller": "mpi"}, {}, "Horovod is not built with the MPI controller"),
])
def test_each_preflight_error_is_one_clear_line(digits_data: Path, train: dict, inputs: dict, message: str) -> None:
    from tasks.launch.horovod_build import check_build_report
    if train.get("controller") == "mpi" and "[X] MPI" in check_build_report().split("Available Tensor")[0]:
        pytest.skip("this Horovod has MPI")
    with pytest.raises(PreflightError, match=f"^{message}"):
        check_launch(Params(train=TrainParams(**train), input=InputParams(**inputs)), digits_data)


def test_preflight_without_data_names_the_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match="no prepared data: .*manifest.json is missing"):
        check_launch(Params(), tmp_path)


def test_preflight_passes_a_resized_resnet(digits_data: Path) -> None:
    assert check_launch(Params(train=TrainParams(model="resnet50", backend="mirrored"),
                               input=InputParams(image_size=32)), digits_data).controller is None


def test_a_bad_interface_stops_the_command_line_before_anything_starts(tmp_path: Path) -> None:
    """Found by using it: the interface was not checked, so a run opened, trained nothing and ended on Horovod's
    `ValueError: No interface is found for address 127.0.0.1`, naming neither the setting nor the interface."""
    from tests.helpers import PYTHON, ROOT, quiet_env, run
    done = run([PYTHON, "-m", "flows.pipeline", "--set", "train.network_interface=nosuchif0"], ROOT, quiet_env(),
               timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: train.network_interface: host localhost has no interface nosuchif0 (it has ")
    assert "MLflow run" not in done.stdout + done.stderr and "Beginning flow run" not in done.stdout + done.stderr


def test_hosts_a_probe_already_answered_are_not_asked_again_and_the_others_are(tmp_path: Path) -> None:
    """A sweep probes its hosts once; each trial's preflight takes their answers (an ssh to h9 would have failed
    in other words) and probes only a host they lack."""
    from tasks.launch.preflight import answers_for
    given = {"h9": "host h9: the answer of the sweep's probe"}
    answered = answers_for(tmp_path, {"h9": 1, "nosuchhost.invalid": 1, "localhost": 1}, given)
    assert answered["h9"] == given["h9"] and "localhost" not in answered  # this machine is never probed
    assert "nosuchhost.invalid" in answered["nosuchhost.invalid"]  # asked now: its own failure


GOOD_MODEL = """import tensorflow as tf


def build(input_shape, outputs):
    return tf.keras.Sequential([tf.keras.layers.Input(input_shape), tf.keras.layers.Flatten(),
                                tf.keras.layers.Dense(outputs, activation="softmax")])
"""
BAD_MODELS = {  # what the user wrote, the function named, the line the preflight ends in (NET: the file's path)
    "no file": (None, "build", r"model file NET does not exist \(NET\)"),
    "no function": (GOOD_MODEL, "make", r"NET: no function make \(it defines: build\)"),
    "import error": ("import tensorflow as tf\nfrom nowhere import layer\n", "build",
                     r"NET:2: importing it raised ModuleNotFoundError: No module named 'nowhere'"),
    "syntax error": ("def build(input_shape, outputs)\n    pass\n", "build", r"NET:1: expected ':'"),
    "raises": ("def build(input_shape, outputs):\n    layers = 3\n    raise ValueError('no such layer')\n", "build",
               r"NET:3: NET:build raised ValueError: no such layer"),
    "no model": ("def build(input_shape, outputs):\n    return {'model': None}\n", "build",
                 r"NET:1: NET:build returned dict, not a Keras model"),
    "outputs do not fit": (GOOD_MODEL.replace("Dense(outputs", "Dense(outputs + 2"), "build",
                           r"NET:4: NET:build gives outputs of shape \(1, 12\), but the data needs \[batch, 10\]"),
    "outputs of another rank": (GOOD_MODEL.replace("tf.keras.layers.Flatten(),", ""), "build",
                                r"NET:4: NET:build gives outputs of shape \(1, 8, 8, 10\), but the data needs "
                                r"\[batch, 10\]"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_each_problem_of_the_user_s_model_is_one_line_naming_its_file_and_line_before_any_launch(
        digits_data: Path, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The preflight builds the model once on the CPU (in the run's fresh TensorFlow process) for the data's
    shapes: each problem is `error: file:line: ...`, exit 2."""
    from tasks.errors import report
    content, function, said = BAD_MODELS[case]
    net = tmp_path / case.replace(" ", "_") / "net.py"
    net.parent.mkdir()
    if content is not None:
        net.write_text(content)
    with pytest.raises(Exception) as raised:  # noqa: PT011  (PreflightError, or ParamsError for a file not there)
        check_launch(Params(train=TrainParams(model=f"{net}:{function}")), digits_data)
    assert report(raised.value) == 2
    line = capsys.readouterr().err
    assert re.fullmatch("error: " + said.replace("NET", re.escape(str(net))) + r"[^\n]*\n", line), line


@pytest.mark.parametrize(("train", "said"), [
    ({"loss": "huberr"}, "train.loss 'huberr' is no Keras loss (tf.keras.losses)"),
    ({"metrics": ["mae", "top_5_accuracy"]}, "train.metrics: 'top_5_accuracy' is no Keras metric (tf.keras.metrics)"),
])
def test_a_loss_or_metric_keras_does_not_have_is_refused_before_any_launch(digits_data: Path, train: dict,
                                                                           said: str) -> None:
    """Each rank would fail on it after the launch; the preflight asks the fresh TensorFlow process once."""
    with pytest.raises(PreflightError, match=f"^{re.escape(said)}$"):
        check_launch(Params(train=TrainParams(**train)), digits_data)
    assert check_launch(Params(train=TrainParams(loss="huber", metrics=["mse"])), digits_data).controller


def test_a_model_that_built_is_not_built_again_for_the_same_code_and_data_in_the_workspace(
        digits_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each build takes a TensorFlow process; the workspace records one that passed, by the digests of the model's
    file and the Python files beside it: a later run (another process) starts none, until that code changes."""
    import shutil

    from tasks.launch import preflight
    from tasks.outputs import export
    from tasks.paths import Workspace
    workspace = Workspace(tmp_path / "project")
    shutil.copytree(digits_data, workspace.prepared_dir)
    monkeypatch.setattr(preflight, "WORKSPACE", workspace)
    net = tmp_path / "project" / "models" / "net.py"
    net.parent.mkdir()
    net.write_text(GOOD_MODEL)
    (net.parent / "helper.py").write_text("UNITS = 8\n")
    params = Params(train=TrainParams(model=f"{net}:build"))

    def built_in_a_new_process() -> bool:
        export.close_fresh_process()
        monkeypatch.setattr(preflight, "MODELS_BUILT", {})
        check_launch(params, workspace.prepared_dir)
        return bool(export._fresh)
    assert built_in_a_new_process() and workspace.models_built.is_file()
    assert not built_in_a_new_process()  # recorded: no TensorFlow process
    (net.parent / "helper.py").write_text("UNITS = 16\n")
    assert built_in_a_new_process()
    assert not built_in_a_new_process()
    check_launch(params, digits_data)  # data other than the workspace's: checked, not recorded
    export.close_fresh_process()
