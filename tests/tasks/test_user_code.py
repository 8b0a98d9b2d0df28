"""The user's code a run imports: found in the workspace (or as an installed module), part of the run's identity
(a changed model file is a changed run, an unchanged one the same), copied beside the job's model."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks import user_code
from tasks.launch.job_config import checkpoint_owner
from tasks.params import Params, ParamsError, load_params
from tasks.versioning.dvc import DataVersion
from tasks.versioning.run_state import run_state
from trainer.config import JobSpec

MANIFEST = {"fingerprint": "f"}
VERSION = DataVersion("data-hash", "commit", False)


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr("tasks.paths.WORKSPACE", type("W", (), {"root": tmp_path})())
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("def build(input_shape, outputs):\n    return None\n")
    return tmp_path


def own(**train: object) -> Params:
    return load_params({"train.model": "models/net.py:build", **{f"train.{k}": v for k, v in train.items()}})


def test_only_import_paths_are_code(workspace: Path) -> None:
    assert user_code.named_code(Params()) == {}
    assert user_code.named_code(own(loss="huber")) == {"model": "models/net.py:build"}
    assert user_code.code_file("models/net.py:build") == workspace / "models" / "net.py"
    assert user_code.code_file("tests.trainer.user_builders:build").name == "user_builders.py"
    with pytest.raises(ParamsError, match=r"^model file models/gone\.py does not exist"):
        user_code.code_file("models/gone.py:build")
    with pytest.raises(ParamsError, match=r"^no module nowhere_at_all\.nets here"):
        user_code.code_file("nowhere_at_all.nets:build")


def test_a_changed_model_file_is_a_changed_run_and_an_unchanged_one_the_same(workspace: Path) -> None:
    before = (run_state(own(), VERSION), checkpoint_owner(own(), MANIFEST), user_code.source_line(own()))
    assert (run_state(own(), VERSION), checkpoint_owner(own(), MANIFEST)) == before[:2]
    (workspace / "models" / "net.py").write_text("def build(input_shape, outputs):\n    return 1\n")
    after = (run_state(own(), VERSION), checkpoint_owner(own(), MANIFEST), user_code.source_line(own()))
    assert after[0].code_digest != before[0].code_digest and after[1] != before[1]
    assert after[0].params_hash == before[0].params_hash  # the same params: the file made the difference
    assert before[2] and after[2] and before[2].startswith("models/net.py:build@") and after[2] != before[2]


def test_the_job_gets_its_own_copy_of_the_model_file(workspace: Path, tmp_path: Path) -> None:
    job = JobSpec(data_dir=tmp_path, out_dir=tmp_path / "job", checkpoint_dir=tmp_path / "ckpt", checkpoint_owner="o",
                  augment=False, data_fingerprint="f", metrics_retry_seconds=1)
    copied = user_code.copy_sources(own(), job)
    assert copied.model_source == tmp_path / "job" / "model_source" / "model_net.py" and copied.loss_source is None
    assert copied.model_source.read_text() == (workspace / "models" / "net.py").read_text()
