"""A run's inputs: data hash, code digest (packages and pinned dependencies, untracked files too), params hash."""
from __future__ import annotations

from pathlib import Path

from tasks.params import load_params
from tasks.versioning.dvc import DataVersion
from tasks.versioning.run_state import RunState, code_digest, code_files, params_hash, run_state


def small_checkout(root: Path) -> Path:
    for name, text in {"tasks/a.py": "A = 1\n", "trainer/b.py": "B = 2\n", "requirements.txt": "x==1\n",
                       "README.md": "words\n", "tasks/__pycache__/a.cpython-311.pyc": "bytes"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_code_is_the_packages_python_and_the_pins_not_the_docs_or_caches(tmp_path: Path) -> None:
    root = small_checkout(tmp_path)
    assert [path.relative_to(root).as_posix() for path in code_files(root)] == \
        ["requirements.txt", "tasks/a.py", "trainer/b.py"]


def test_the_code_digest_changes_with_code_and_pins_and_not_with_the_readme(tmp_path: Path) -> None:
    root = small_checkout(tmp_path)
    before = code_digest(root)
    (root / "README.md").write_text("other words\n")
    assert code_digest(root) == before
    (root / "tasks" / "new.py").write_text("")  # an untracked module counts
    assert code_digest(root) != before


def test_a_run_state_names_what_changed_since_a_previous_one(tmp_path: Path) -> None:
    params = load_params()
    state = run_state(params, DataVersion("d1", "commit", False), small_checkout(tmp_path))
    previous = {"data_hash": "d1", "code_digest": state.code_digest, "params_hash": params_hash(params)}
    assert state.changes_from(previous) == []
    assert state.changes_from(previous | {"data_hash": "d0"}) == ["data"]
    other = load_params({"train.epochs": str(params.train.epochs + 1)})
    assert params_hash(other) != state.params_hash
    assert RunState("d1", state.code_digest, params_hash(other)).key != state.key and len(state.key) == 20
    assert params_hash(load_params({"sweep.trials": "3"})) == state.params_hash  # a sweep's search trains nothing
    assert params_hash(load_params({"serving.port": "9000"})) == state.params_hash  # nor how the champion is served
