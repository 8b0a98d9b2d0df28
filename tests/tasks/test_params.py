"""Parameters: params.yaml defaults, overrides, and one clear line for each bad value."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.params import ParamsError, load_params, parse_assignments
from tests.helpers import PYTHON, ROOT, quiet_env, run

BAD_VALUES = [
    ("model=resnet9000", "bad parameter train.model: unknown model 'resnet9000'"),
    ("dataset=imagenet", "bad parameter data.dataset: unknown dataset 'imagenet'"),
    ("np=0", "bad parameter train.np: Input should be greater than or equal to 1"),
    ("batch_size=0", "bad parameter train.batch_size: Input should be greater than or equal to 1"),
    ("train.epochs=0", "bad parameter train.epochs: Input should be greater than or equal to 1"),
    ("epochz=3", "bad parameter epochz: no such parameter"),
    ("shared_fs=maybe", "bad parameter train.shared_fs: Input should be 'auto', true or false (got 'maybe')"),
    ("slurm.time_limit=90", "bad parameter slurm.time_limit: '90' is not a time limit: [days-]HH:MM:SS"),
    ("slurm.partition=gpu;rm", "bad parameter slurm.partition: 'gpu;rm' is not a Slurm name"),
]


def test_defaults_come_from_params_yaml() -> None:
    params = load_params()
    assert (params.train.np, params.train.model, params.data.dataset) == (2, "cnn", "digits")


def test_params_yaml_is_the_models_defaults_as_ringflow_writes_them() -> None:
    import yaml

    from tasks.params import Params
    from tasks.params_file import COMMENTS, render_params
    from tasks.paths import PARAMS_FILE
    assert PARAMS_FILE.read_text() == render_params()
    assert yaml.safe_load(render_params()) == Params().model_dump(mode="json")
    sections = Params().model_dump()
    keys = {section for section in sections} | {f"{section}.{key}" for section in sections for key in sections[section]}
    assert set(COMMENTS) <= keys  # a comment of a key that is no more, or misspelled, fails
    assert all(len(line) <= 120 for line in render_params().splitlines())


def test_overrides_by_plain_and_dotted_name() -> None:
    params = load_params({"epochs": "3", "train.np": 1, "scale_lr": "false"})
    assert (params.train.epochs, params.train.np, params.train.scale_lr) == (3, 1, False)


def test_ambiguous_name_needs_a_section() -> None:
    with pytest.raises(ParamsError, match="seed: ambiguous"):
        load_params({"seed": "1"})


def test_under_slurm_np_is_nodes_times_tasks_per_node() -> None:
    params = load_params({"train.scheduler": "slurm", "slurm.nodes": 3, "slurm.tasks_per_node": 4, "train.np": 2})
    assert params.train.np == 12
    assert load_params({"slurm.nodes": 3, "train.np": 2}).train.np == 2  # without the scheduler, np as given


def test_hosts_with_scheduler_slurm_are_one_line() -> None:
    with pytest.raises(ParamsError) as problem:
        load_params({"train.scheduler": "slurm", "train.hostfile": "hosts.txt"})
    assert str(problem.value) == ("bad parameter train: hostfile is set but scheduler slurm takes its hosts from the "
                                  "allocation: leave train.hostfile unset (slurm.nodes and slurm.tasks_per_node say "
                                  "how many)")


def test_assignment_without_equals_is_refused() -> None:
    with pytest.raises(ParamsError, match="expected KEY=VALUE"):
        parse_assignments(["epochs"])


@pytest.fixture(scope="module")
def pipelines_given_bad_values() -> dict[str, subprocess.CompletedProcess]:
    """`python -m flows.pipeline --set <bad value>` for each bad value, all at once (each is mostly imports)."""
    started = {override: subprocess.Popen([PYTHON, "-m", "flows.pipeline", "--set", override], cwd=ROOT,
                                          env=quiet_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for override, _ in BAD_VALUES}
    finished = {}
    for override, process in started.items():
        stdout, stderr = process.communicate(timeout=180)
        finished[override] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return finished


@pytest.mark.parametrize(("override", "message"), BAD_VALUES)
def test_bad_value_stops_the_pipeline_with_one_line(override: str, message: str,
                                                    pipelines_given_bad_values: dict) -> None:
    done = pipelines_given_bad_values[override]
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), done.stderr
    assert "Flow run" not in done.stdout + done.stderr  # nothing was launched


def test_bad_value_stops_a_dvc_stage_command() -> None:
    done = run([PYTHON, "-m", "tasks", "train", "--set", "np=0"], ROOT, quiet_env(), timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: bad parameter train.np: Input should be greater than or equal to 1 (got 0)"


def documented_enum_values() -> list[tuple[str, str, str]]:
    """(section, field, value) for every value of every enum parameter."""
    from tasks.params import Params
    from trainer.config import literal_words
    return [(section, name, word) for section, model in Params.model_fields.items()
            for name, field in model.annotation.model_fields.items()
            for word in literal_words(field.annotation)]


@pytest.mark.parametrize(("section", "name", "value"), documented_enum_values())
def test_every_enum_value_works_through_every_path(section: str, name: str, value: str, tmp_path) -> None:
    import yaml

    from tasks.paths import PARAMS_FILE
    expected = value
    through_set = load_params(parse_assignments([f"{section}.{name}={value}"]))  # --set KEY=VALUE
    written = yaml.safe_load(PARAMS_FILE.read_text())
    written[section][name] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(written).replace(f"'{value}'", value))  # unquoted in YAML
    through_file = load_params(path=tmp_path / "params.yaml")
    through_deployment = load_params({f"{section}.{name}": value})  # a deployment's `overrides` (JSON strings)
    for params in (through_set, through_file, through_deployment):
        assert getattr(getattr(params, section), name) == expected


def test_documented_enum_values_include_off() -> None:
    assert ("input", "augment", "off") in documented_enum_values()


@pytest.mark.parametrize(("text", "message"), [
    ("train:\n  epochs: 2\n\tnp: 2\n",
     "params.yaml line 3 column 1: found character '\\t' that cannot start any token"),
    ("train:\n  epochs: : [\n", "params.yaml line 2 column 11: mapping values are not allowed here"),
    ("train: [1, 2\n", "params.yaml line 2 column 1: expected ',' or ']', but got '<stream end>'"),
])
def test_a_malformed_params_yaml_is_one_line_naming_line_and_column(text: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ParamsError) as raised:
        load_params(path=tmp_path / "params.yaml")
    said = str(raised.value)
    assert said.startswith(message) and "\n" not in said and "^" not in said
