"""The examples/ projects: each params.yaml is valid and says what its README's run line sets, each data maker
writes data prepare accepts, and each model file's builder gives a model that fits that data and trains a step
(builders and data makers, not whole pipeline runs: those are the end-to-end tests' of tests/flows)."""
from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tasks.params import DataParams, load_params

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ["digits-cnn", "own-image-model", "field-regressor"]


def flat(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"epochs": 3}} -> {"train.epochs": 3}; model_args stays one value."""
    found: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and key != "model_args":
            found.update(flat(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


def run_line_settings(name: str) -> dict[str, Any]:
    """The `--set key=value` of the README's `make run ARGS="..."` line, values read as YAML reads them."""
    line = next(line for line in (EXAMPLES / name / "README.md").read_text().splitlines()
                if line.startswith("make run ARGS="))
    arguments = shlex.split(shlex.split(line)[2].removeprefix("ARGS="))
    pairs = [arguments[index + 1] for index, word in enumerate(arguments) if word == "--set"]
    return {key: yaml.safe_load(value) for key, value in (pair.split("=", 1) for pair in pairs)}


def module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.parametrize("name", NAMES)
def test_an_example_s_params_are_valid_and_its_readme_runs_them(name: str) -> None:
    """Valid once the data exists (validation looks for it): the data path is where the example's maker writes. Its
    README runs its params.yaml: as `--set` overrides where it changes no data.* key, else copied over the
    workspace's (the pipeline refuses data.* overrides: DVC versions the data by params.yaml)."""
    params = load_params({"data.dataset": "digits"}, path=EXAMPLES / name / "params.yaml")
    given = flat(yaml.safe_load((EXAMPLES / name / "params.yaml").read_text()))
    readme = (EXAMPLES / name / "README.md").read_text()
    ringflow = flat(yaml.safe_load((EXAMPLES.parent / "params.yaml").read_text()))
    assert set(given) == set(ringflow)  # a whole params.yaml: DVC's stages read every data.* key of it
    if given["data.dataset"] == "digits":
        run_line = run_line_settings(name)
        assert not [key for key in run_line if key.startswith("data.")]
        assert {key: given[key] for key in run_line} == run_line
        assert {key for key in given if given[key] != ringflow[key]} == set(run_line)
    else:
        assert f"cp examples/{name}/params.yaml params.yaml\nmake run\n" in readme
        maker = module(EXAMPLES / name / "make_data.py")
        assert EXAMPLES.parent / given["data.dataset"].split(":", 1)[1] == maker.DEFAULT
        assert f".venv/bin/python examples/{name}/make_data.py\n" in readme
    if ":" in params.train.model:  # a model file of the example's own, named from the workspace (the checkout)
        assert (EXAMPLES.parent / params.train.model.rsplit(":", 1)[0]).is_file()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each example's data, made by its make_data.py (small) and prepared."""
    from tasks.data.prepare import prepare
    from trainer.prepared_data import read_manifest
    folder = tmp_path_factory.mktemp("examples")
    images = module(EXAMPLES / "own-image-model" / "make_data.py").make_data(folder / "digits-png", 12)
    field = module(EXAMPLES / "field-regressor" / "make_data.py").make_data(folder / "field.npz", 400)
    made = {}
    for name, source in (("own-image-model", f"folder:{images}"), ("field-regressor", f"npz:{field}")):
        prepare(DataParams(dataset=source, min_shards=2), folder / name, progress=False)
        made[name] = (folder / name, read_manifest(folder / name))
    return made


@pytest.mark.parametrize(("name", "kind", "task"), [("own-image-model", "image", "classification"),
                                                    ("field-regressor", "tensor", "regression")])
def test_an_example_s_model_fits_its_data_and_trains_a_step(
        name: str, kind: str, task: str, prepared: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    import numpy as np

    from trainer.data import model_input_shape
    from trainer.models import build_model
    from trainer.prepared_data import data_kind, data_task, output_size
    params = load_params({"data.dataset": "digits"}, path=EXAMPLES / name / "params.yaml")
    _, manifest = prepared[name]
    assert (data_kind(manifest), data_task(manifest, params.train.task)) == (kind, task)
    shape, outputs = model_input_shape(manifest), output_size(manifest, task)
    model = build_model(str(EXAMPLES.parent / params.train.model), shape, outputs, params.train.model_args)
    x = np.random.default_rng(0).uniform(0, 255 if kind == "image" else 1, (8, *shape)).astype("float32")
    y = np.arange(8) % outputs if task == "classification" else np.zeros((8, outputs), "float32")
    model.compile("adam", "sparse_categorical_crossentropy" if task == "classification" else "mse")
    before = [weights.copy() for weights in model.get_weights()]
    history = model.fit(x, y, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.array_equal(old, new) for old, new in zip(before, model.get_weights()))
    predicted = model.predict(x, verbose=0)
    assert predicted.shape == (8, outputs)
    if task == "classification":  # the builder's contract: probabilities
        np.testing.assert_allclose(predicted.sum(axis=1), 1.0, rtol=1e-4)


def test_the_field_maker_writes_the_field_it_names() -> None:
    import numpy as np
    maker = module(EXAMPLES / "field-regressor" / "make_data.py")
    points = np.array([[0.5, 0.0], [-0.5, 1.0], [1.0, 0.3]])
    np.testing.assert_allclose(maker.field(points), [1.0, -np.exp(-1.0), 0.0], atol=1e-12)
    assert re.search(r"sin\(pi x\) exp\(-t\)", (EXAMPLES / "field-regressor" / "README.md").read_text())
