"""Model registry and promotion gate, against a real MLflow store in a temporary folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.data.prepare import prepare
from tasks.outputs.export import close_fresh_process
from tasks.params import DataParams
from tasks.steps import champion_scorer
from tasks.tracking import mlflow_store, model_registry
from tasks.tracking.model_registry import CHALLENGER, CHAMPION, apply_gate, decide_gate, log_registered_model
from tests.tasks.tracking.conftest import EXPERIMENT

CLASS_NAMES = [f"digit {index}" for index in range(10)]


def tiny_savedmodel(path: Path) -> Path:
    """A SavedModel with ringflow's signatures, as the training writes them: 8x8x1 images -> 10 classes."""
    import tensorflow as tf

    from trainer.model_outputs import write_savedmodel
    model = tf.keras.Sequential([tf.keras.layers.Input((8, 8, 1)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    write_savedmodel(model, path, CLASS_NAMES)
    return path


def logged(run_id: str, savedmodel: Path, example: np.ndarray) -> str:
    """log_registered_model, its input example made of `example`."""
    return log_registered_model(run_id, savedmodel, example, CLASS_NAMES, "gate-test")


def registered_run(savedmodel: Path, test_accuracy: float) -> str:
    """A finished run holding test_accuracy and the model, registered; returns the new version."""
    run_id = mlflow_store.start_run(EXPERIMENT, {"learning_rate": test_accuracy, "data_hash": "abc.dir"}, {})
    mlflow_store.log_metrics(run_id, {"test_accuracy": test_accuracy})
    example = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 1)).astype(np.float32)
    return logged(run_id, savedmodel, example)


def gate(version: str, accuracy: float, score: object = model_registry.recorded_accuracy) -> object:
    """Decide and apply the gate for a new version (by default the champion scores what it recorded: same split)."""
    decision = decide_gate("gate-test", version, accuracy, 0.01, "split-a", score)
    apply_gate(decision)
    return decision


def test_gate_promotes_a_better_model_and_refuses_a_worse_one(store_dir: Path) -> None:
    import mlflow.pyfunc
    savedmodel = tiny_savedmodel(store_dir / "savedmodel")
    first = gate(registered_run(savedmodel, 0.90), 0.90)
    assert (first.alias, first.champion_value) == (CHAMPION, None)
    better = gate(registered_run(savedmodel, 0.95), 0.95)
    assert (better.alias, better.champion_version, better.champion_value) == (CHAMPION, first.version, 0.90)
    marginal = gate(registered_run(savedmodel, 0.955), 0.955)
    assert (marginal.alias, marginal.champion_version, marginal.champion_value) == (CHALLENGER, better.version, 0.95)
    client = mlflow_store.client()
    assert str(client.get_model_version_by_alias("gate-test", CHAMPION).version) == better.version
    assert str(client.get_model_version_by_alias("gate-test", CHALLENGER).version) == marginal.version
    tags = client.get_model_version("gate-test", marginal.version).tags
    recorded = (tags["gate.decision"], tags["test_accuracy"], tags["gate.champion_accuracy"])
    assert recorded == ("challenger", "0.955", "0.95")
    model = mlflow.pyfunc.load_model("models:/gate-test@champion")
    assert [column["name"] for column in model.metadata.signature.inputs.to_dict()] == ["image", "pixels"]
    example = model.input_example  # PNG bytes of the example images, as a client sends them
    answer = model.predict(example)
    assert list(answer.columns) == ["class", "score", "probabilities", "error"] and len(answer) == 2
    assert set(answer["class"]) <= set(CLASS_NAMES) and set(answer["error"]) == {""}
    pixels = np.rint(np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 1))).astype(np.float32)  # as the PNGs hold
    floats = model.predict(pd.DataFrame({"pixels": list(pixels.reshape(2, -1))}))  # a row per image, flattened
    assert np.allclose([list(row.values()) for row in floats["probabilities"]],
                       [list(row.values()) for row in answer["probabilities"]], atol=1e-5)
    assert all(abs(sum(row.values()) - 1.0) < 1e-5 for row in floats["probabilities"])



def rule_savedmodel(path: Path, rule: str) -> Path:
    """A SavedModel of two classes: `dark` always says class 0; `bright` says 1 when the mean pixel exceeds 127."""
    import tensorflow as tf

    class Rule(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="images")])
        def serve(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
            bright = tf.cast(tf.reduce_mean(images, axis=[1, 2, 3]) > 127.0, tf.int64)
            classes = tf.zeros_like(bright) if rule == "dark" else bright
            return {"probabilities": tf.one_hot(classes, 2), "classes": classes}

    module = Rule()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def prepared_split(folder: Path, labelled: list[tuple[int, int, int]]) -> Path:
    """Prepared data whose test split holds (count, pixel value, label) groups of flat 8x8 images."""
    test_x = np.concatenate([np.full((count, 8, 8), value, np.uint8) for count, value, _ in labelled])
    test_y = np.concatenate([np.full(count, label) for count, _, label in labelled])
    train_x = np.concatenate([np.zeros((20, 8, 8), np.uint8), np.full((20, 8, 8), 255, np.uint8)])
    np.savez(folder / "arrays.npz", x_train=train_x, y_train=np.repeat([0, 1], 20), x_test=test_x, y_test=test_y)
    prepare(DataParams(dataset=f"npz:{folder / 'arrays.npz'}", min_shards=1), folder / "prepared", progress=False)
    return folder / "prepared"


def test_the_gate_scores_the_champion_on_the_new_test_split(store_dir: Path) -> None:
    from tasks.outputs.evaluate import split_hash
    from trainer.prepared_data import read_manifest
    example = np.zeros((2, 8, 8, 1), np.float32)
    dark = rule_savedmodel(store_dir / "dark", "dark")
    run_id = mlflow_store.start_run(EXPERIMENT, {"data_hash": "a.dir"}, {})
    champion = gate(logged(run_id, dark, example), 1.0)  # its own split: all dark 0s
    (store_dir / "b").mkdir()
    split_b = prepared_split(store_dir / "b", [(50, 0, 0), (40, 255, 1), (10, 0, 1)])
    bright = rule_savedmodel(store_dir / "bright", "bright")
    version = logged(mlflow_store.start_run(EXPERIMENT, {"data_hash": "b.dir"}, {}), bright, example)
    scorer = champion_scorer("test_accuracy", "classification", None)
    rescore = lambda version: model_registry.score_registered_model(version, split_b, scorer)  # noqa: E731
    decision = decide_gate("gate-test", version, 0.9, 0.01, split_hash(read_manifest(split_b)), rescore)
    assert (decision.alias, decision.champion_version) == (CHAMPION, champion.version)  # 0.9 vs 1.0 would refuse
    assert (decision.champion_value, decision.champion_recorded_value) == (0.5, 1.0)
    assert decision.test_split == split_hash(read_manifest(split_b)) and "same test split" in decision.sentence()
    close_fresh_process()


def test_a_champion_s_signed_score_on_a_split_is_read_instead_of_scoring_it_again(store_dir: Path) -> None:
    """Its registration records its own score on its split; a gate that scored it on another split records that
    one; a score whose signature does not hold (a registry writer's) is scored again."""
    from tasks.outputs.evaluate import split_hash
    from tasks.steps import champion_score
    from trainer.prepared_data import read_manifest
    dark = rule_savedmodel(store_dir / "dark", "dark")
    run_id = mlflow_store.start_run(EXPERIMENT, {"data_hash": "a.dir"}, {})
    version = log_registered_model(run_id, dark, np.zeros((2, 8, 8, 1), np.float32), CLASS_NAMES, "gate-test",
                                   own_score=("split-a", "test_accuracy", 1.0))
    gate(version, 1.0)
    assert model_registry.recorded_score(model_registry.current_champion("gate-test"), "split-a",
                                         "test_accuracy") == 1.0
    (store_dir / "b").mkdir()
    split_b = prepared_split(store_dir / "b", [(50, 0, 0), (40, 255, 1), (10, 0, 1)])
    scored: list[Path] = []
    scorer = champion_scorer("test_accuracy", "classification", None)

    def counted(savedmodel: Path, data_dir: Path) -> float | None:
        scored.append(savedmodel)
        return scorer(savedmodel, data_dir)
    split = split_hash(read_manifest(split_b))
    for _ in range(2):
        champion = model_registry.current_champion("gate-test")
        assert champion_score(champion, split, "test_accuracy", counted, split_b) == 0.5
    assert len(scored) == 1  # the second read the signed score
    tag = model_registry.registry_signature.score_tag(split, "test_accuracy")
    forged = "0.99 " + champion.tags[tag].split(" ")[1]
    mlflow_store.client().set_model_version_tag("gate-test", version, tag, forged)
    assert model_registry.recorded_score(model_registry.current_champion("gate-test"), split, "test_accuracy") is None
    assert champion_score(model_registry.current_champion("gate-test"), split, "test_accuracy", counted,
                          split_b) == 0.5
    assert len(scored) == 2
    close_fresh_process()


def test_a_run_starts_the_fresh_process_ahead_only_for_a_champion_with_no_score_on_its_split(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks import steps
    from tasks.outputs.evaluate import split_hash
    from tasks.params import Params, RegistryParams
    from trainer.prepared_data import read_manifest
    (store_dir / "b").mkdir()
    split_b = prepared_split(store_dir / "b", [(5, 0, 0), (5, 255, 1)])
    monkeypatch.setattr(steps, "PREPARED_DIR", split_b)
    params = Params(registry=RegistryParams(model_name="gate-test"))
    assert not steps.champion_needs_scoring(params)  # no champion
    dark = rule_savedmodel(store_dir / "dark", "dark")
    version = log_registered_model(mlflow_store.start_run(EXPERIMENT, {}, {}), dark,
                                   np.zeros((2, 8, 8, 1), np.float32), CLASS_NAMES, "gate-test",
                                   own_score=("split-a", "test_accuracy", 1.0))
    gate(version, 1.0)
    assert steps.champion_needs_scoring(params)  # scored on its own split only
    model_registry.record_score(model_registry.current_champion("gate-test"), split_hash(read_manifest(split_b)),
                                "test_accuracy", 0.5)
    assert not steps.champion_needs_scoring(params)


def test_a_registry_error_is_not_taken_for_no_champion(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers import free_port
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with pytest.raises(Exception, match="127.0.0.1"):
        model_registry.current_champion("gate-test")


def test_the_gate_metric_and_its_direction() -> None:
    from tasks.tracking.model_registry import gate_metric
    assert gate_metric(None, "auto", "classification") == ("test_accuracy", "max")
    assert gate_metric(None, "auto", "regression") == ("test_mae", "min")
    assert [gate_metric(name, "auto", "regression")[1] for name in ("test_rmse", "test_loss", "test_r2")] == \
        ["min", "min", "max"]
    assert gate_metric("test_r2", "min", "regression") == ("test_r2", "min")  # stated: as stated


def tensor_savedmodel(path: Path) -> Path:
    """A regressor's SavedModel as the training writes it: 3 features -> 2 targets."""
    import tensorflow as tf

    from trainer.model_outputs import write_tensor_savedmodel
    model = tf.keras.Sequential([tf.keras.layers.Input((3,)), tf.keras.layers.Dense(2)])
    write_tensor_savedmodel(model, path, (3,), "regression")
    return path


def test_the_gate_promotes_a_regressor_on_test_mae_min_and_refuses_a_worse_one(store_dir: Path) -> None:
    import mlflow.pyfunc

    from tasks.tracking.model_registry import ModelKind, recorded_value
    savedmodel, kind = tensor_savedmodel(store_dir / "regressor"), ModelKind("regression", (3,), 2)
    example = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)

    def gated(mae: float) -> object:
        run_id = mlflow_store.start_run(EXPERIMENT, {"data_hash": "r.dir"}, {})
        mlflow_store.log_metrics(run_id, {"test_mae": mae})
        version = log_registered_model(run_id, savedmodel, example, [], "gate-mae", kind)
        decision = decide_gate("gate-mae", version, mae, 0.01, "split-r", lambda v: recorded_value(v, "test_mae"),
                               "test_mae", "min")
        apply_gate(decision)
        return decision
    first, better, worse = gated(0.5), gated(0.3), gated(0.295)
    assert (first.alias, better.alias, better.champion_value) == (CHAMPION, CHAMPION, 0.5)
    assert (worse.alias, worse.champion_value) == (CHALLENGER, 0.3)  # lower, but by less than min_delta
    assert "test_mae (lower is better) 0.2950 vs champion" in worse.sentence()
    tags = mlflow_store.client().get_model_version("gate-mae", worse.version).tags
    assert (tags["test_mae"], tags["gate.champion_mae"], tags["gate.metric"], tags["gate.mode"]) == \
        ("0.295", "0.3", "test_mae", "min")
    model = mlflow.pyfunc.load_model("models:/gate-mae@champion")
    assert list(model.metadata.signature.inputs.to_dict()[0]["tensor-spec"]["shape"]) == [-1, 3]
    assert model.predict(example).shape == (2, 2)


def test_a_gate_metric_no_run_gives_is_one_line_before_training_and_an_old_decision_reads() -> None:
    from tasks.tracking.model_registry import GateDecision, gate_metric_problem, gate_value
    regression = {"num_classes": 0, "target_names": ["u", "v"]}
    assert gate_metric_problem("test_mae/v", "regression", regression, []) is None
    assert gate_metric_problem("test_mape", "regression", regression, ["mape"]) is None
    assert gate_metric_problem("test_accuracy", "regression", regression, []) == (
        "registry.metric 'test_accuracy' is no test metric of a regression run (test_loss, test_mae, test_mse, "
        "test_r2, test_rmse, or test_<name> of a Keras metric in train.metrics)")
    with pytest.raises(ValueError, match=r"^registry.metric 'test_r3' is not among this run's test metrics "
                                         r"\(test_mae, test_r2\)$"):
        gate_value({"test_mae": 0.1, "test_r2": 0.9, "test_mae/u": 0.1}, "test_r3")
    old = GateDecision.from_dict({"model_name": "m", "version": "2", "alias": "champion", "test_accuracy": 0.9,
                                  "champion_version": "1", "champion_accuracy": 0.8,
                                  "champion_recorded_accuracy": 0.85, "min_delta": 0.001, "test_split": "s",
                                  "note": ""})
    assert (old.value, old.champion_value, old.metric, old.mode) == (0.9, 0.8, "test_accuracy", "max")
    assert old.sentence() == ("m v2 promoted to champion: test accuracy 0.9000 vs champion v1 0.8000 on the same "
                              "test split (min_delta 0.001)")
    assert GateDecision.from_dict(old.as_dict()) == old
