"""Export: the SavedModel the training's lead wrote, whose `serving_default` takes float images and gives
probabilities and classes; the parity sample is the first test images at the model's input with the model's
probabilities and the SavedModel's, reloaded by the lead right after writing it; export publishes the SavedModel only
when the reload agrees (a model directory without the lead's reload: reloaded in a fresh process)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tasks.outputs import export as export_module
from tasks.outputs.export import PARITY_TOLERANCE, NoSavedModel, export, parity_sample
from tests.tasks.outputs.conftest import Exported
from trainer.model_io import load_model
from trainer.model_outputs import PARITY_SAMPLE, SAVEDMODEL
from trainer.prepared_data import read_manifest


def test_the_serving_signature_takes_images_and_gives_probabilities_and_classes(exported: Exported) -> None:
    serve = tf.saved_model.load(str(exported.savedmodel)).signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["images"]
    given = serve(images=tf.constant(exported.images))
    assert sorted(given) == ["classes", "probabilities"]
    assert given["classes"].numpy().tolist() == np.argmax(exported.expected, axis=-1).tolist()


def test_the_parity_sample_is_the_first_test_images_with_the_model_s_probabilities(exported: Exported,
                                                                                   digits_data: Path) -> None:
    images, probabilities = parity_sample(exported.model_dir)
    test_records = read_manifest(digits_data)["splits"]["test"]["count"]
    assert images.shape == (min(256, test_records), 8, 8, 1) and images.dtype == np.float32
    assert 0 <= images.min() < images.max() <= 255
    assert np.allclose(probabilities, load_model(exported.model_dir)(images, training=False).numpy(), atol=1e-6)


def test_the_lead_s_reload_of_its_savedmodel_is_published_without_a_tensorflow_process(
        exported: Exported, tmp_path: Path) -> None:
    export_module.close_fresh_process()  # one another test of this process left
    with np.load(exported.model_dir / PARITY_SAMPLE) as saved:
        assert saved["reloaded"].shape == saved["probabilities"].shape
        assert np.abs(saved["reloaded"] - saved["probabilities"]).max() <= PARITY_TOLERANCE
    result = export(exported.model_dir, tmp_path / "savedmodel")
    assert result.path == tmp_path / "savedmodel" and (result.path / "saved_model.pb").is_file()
    assert result.max_abs_diff <= PARITY_TOLERANCE and result.checked_images > 0
    assert not export_module._fresh  # no fresh process was asked, nor started


def without_the_lead_s_reload(exported: Exported, model_dir: Path) -> Path:
    """A copy of the model directory as a training before the lead's reload check wrote it."""
    shutil.copytree(exported.model_dir, model_dir)
    with np.load(model_dir / PARITY_SAMPLE) as saved:
        arrays = {name: saved[name] for name in saved.files if name != "reloaded"}
    np.savez(model_dir / PARITY_SAMPLE, **arrays)
    return model_dir


def test_a_reload_that_differs_from_the_trained_model_is_not_published(exported: Exported, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(exported.model_dir, model_dir)
    with np.load(model_dir / PARITY_SAMPLE) as saved:
        arrays = {name: saved[name] for name in saved.files}
    np.savez(model_dir / PARITY_SAMPLE, **(arrays | {"reloaded": arrays["reloaded"] + 0.01}))
    with pytest.raises(RuntimeError, match="SavedModel reload differs from the trained model by 0.01"):
        export(model_dir, tmp_path / "savedmodel")
    assert not (tmp_path / "savedmodel").exists()


def test_a_model_without_the_lead_s_reload_is_reloaded_by_the_fresh_process_started_ahead(
        exported: Exported, tmp_path: Path) -> None:
    model_dir = without_the_lead_s_reload(exported, tmp_path / "model")
    export_module.start_fresh_process_ahead()
    (ahead,) = export_module._fresh
    result = export(model_dir, tmp_path / "savedmodel")
    assert (result.path / "saved_model.pb").is_file() and result.max_abs_diff <= PARITY_TOLERANCE
    assert export_module.fresh_process() is ahead  # the one asked, kept for register's scoring
    export_module.close_fresh_process()
    assert ahead.process.returncode == 0 and not export_module._fresh


def test_a_fresh_process_closed_without_waiting_ends_on_its_own() -> None:
    export_module.start_fresh_process_ahead()
    (ahead,) = export_module._fresh
    export_module.close_fresh_process(wait=False)
    assert not export_module._fresh
    assert ahead.process.wait(timeout=120) == 0


def test_a_fresh_process_started_ahead_that_died_is_replaced() -> None:
    export_module.start_fresh_process_ahead()
    (dead,) = export_module._fresh
    dead.process.kill()
    dead.process.wait()
    replacement = export_module.fresh_process()
    assert replacement is not dead and replacement.alive()
    export_module.close_fresh_process()
    assert replacement.process.returncode == 0  # unasked, it ends at the end of its input


def test_a_savedmodel_that_does_not_reload_leaves_nothing(exported: Exported, tmp_path: Path) -> None:
    model_dir = without_the_lead_s_reload(exported, tmp_path / "model")
    (model_dir / SAVEDMODEL / "saved_model.pb").write_text("not a SavedModel")
    with pytest.raises(RuntimeError, match="the SavedModel's reload failed: "):
        export(model_dir, tmp_path / "savedmodel")
    assert not (tmp_path / "savedmodel").exists()
    export_module.close_fresh_process()


def test_a_model_without_a_savedmodel_is_one_line_that_says_to_train_again(exported: Exported,
                                                                           tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(exported.model_dir, model_dir, ignore=shutil.ignore_patterns(SAVEDMODEL))
    with pytest.raises(NoSavedModel, match=r"^no SavedModel: .* is missing \(its training wrote none: train again\)$"):
        export(model_dir, tmp_path / "savedmodel")
    assert NoSavedModel.bad_input and not (tmp_path / "savedmodel").exists()


def test_threads_asking_one_fresh_process_each_get_their_own_answer(tmp_path: Path) -> None:
    """A sweep's trials check their models from threads of their own through the one fresh process: a thread never
    reads another's answer (which left the other waiting for ever)."""
    import threading
    fresh = export_module.FreshProcess()
    good = {"model": "cnn", "source": None, "input_shape": [8, 8, 1], "outputs": 10, "model_args": {}, "loss": None,
            "loss_source": None}
    missing = dict(good, model="net.py:build", source=str(tmp_path / "net.py"))
    answers: dict[str, list[object]] = {"good": [], "missing": []}

    def ask(name: str, request: dict[str, object]) -> None:
        for _ in range(3):
            answers[name].append(fresh.ask("build", **request))
    threads = [threading.Thread(target=ask, args=item, daemon=True) for item in (("good", good), ("missing", missing))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)  # a bound on a lost answer (a thread waiting for ever), not a speed goal
    fresh.close()
    assert answers["good"] == [None] * 3
    assert len(answers["missing"]) == 3 and all("does not exist" in str(answer) for answer in answers["missing"])
