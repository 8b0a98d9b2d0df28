"""register: the exported SavedModel as an MLflow model (signature, input example) in the registry, and the
promotion gate: alias `champion` moves to a new version only if its test metric (registry.metric: by default test
accuracy for a classifier, test MAE for a regressor) beats the champion's by at least `min_delta` in the metric's
direction (registry.mode), both measured on the same test split (the champion is scored again on the new run's
split); otherwise the new version is the `challenger`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tasks.paths import ROOT
from tasks.tracking import mlflow_store, registry_signature

MODEL_ARTIFACT = "mlflow-model"
SERVING_MODEL_FILE = ROOT / "tasks" / "outputs" / "serving_model.py"  # the pyfunc model, logged as code
CHAMPION, CHALLENGER = "champion", "challenger"
CLASSES_KEY = "classes"  # the class names, in the registered model's config (log_registered_model)
DEFAULT_METRIC = "test_accuracy"  # a classifier's (and the gate's records before registry.metric)
LOWER_IS_BETTER = ("loss", "mae", "mse", "rmse", "error")  # mode auto: a metric whose name holds one is minimised


def gate_metric(metric: str | None, mode: str, task: str) -> tuple[str, str]:
    """(the test metric the gate compares, "max" or "min"): registry.metric (None: test_accuracy for a classifier,
    test_mae for a regressor) in registry.mode (auto: "min" when its name says loss, mae, mse, rmse or error)."""
    name = metric or (DEFAULT_METRIC if task == "classification" else "test_mae")
    if mode == "auto":
        mode = "min" if any(word in name.lower() for word in LOWER_IS_BETTER) else "max"
    return name, mode


class NoGateMetric(ValueError):
    """registry.metric names no test metric of the run."""
    bad_input = True


def gate_value(metrics: dict[str, float], metric: str) -> float:
    """The run's value of the gate's metric; NoGateMetric (one line) when the evaluation has none of that name."""
    if metric not in metrics:
        raise NoGateMetric(f"registry.metric {metric!r} is not among this run's test metrics "
                           f"({', '.join(sorted(name for name in metrics if '/' not in name))})")
    return float(metrics[metric])


def test_metric_names(task: str, manifest: dict[str, Any], train_metrics: list[str]) -> set[str]:
    """The test metrics evaluate gives a model of this task on this data (test_loss of a regressor: when its loss
    is Keras's), as registry.metric may name them."""
    if task == "classification":
        names = {"test_loss", "test_accuracy"} | ({"test_top5_accuracy"} if manifest["num_classes"] > 10 else set())
    else:
        targets = [str(name) for name in manifest.get("target_names") or []]
        names = {"test_loss", "test_mae", "test_mse", "test_rmse", "test_r2"}
        if len(targets) > 1:
            names |= {f"test_{score}/{name}" for name in targets for score in ("mae", "rmse", "r2")}
    return names | {f"test_{name}" for name in train_metrics}


def gate_metric_problem(metric: str | None, task: str, manifest: dict[str, Any],
                        train_metrics: list[str]) -> str | None:
    """Why registry.metric cannot be the gate's for this run (one line, before anything trains), or None."""
    if metric is None or metric in test_metric_names(task, manifest, train_metrics):
        return None
    known = sorted(name for name in test_metric_names(task, manifest, train_metrics) if "/" not in name)
    return f"registry.metric {metric!r} is no test metric of a {task} run ({', '.join(known)}, or test_<name> of " \
           "a Keras metric in train.metrics)"


def short_name(metric: str) -> str:
    """The metric's name in the gate's records: test_accuracy -> accuracy (gate.champion_accuracy)."""
    return metric.removeprefix("test_")


@dataclass(frozen=True)
class GateDecision:
    """Which alias a new model version gets, and the numbers that decided it (all on the test split `test_split`):
    the new version's `value` of `metric` and the champion's, better when higher (mode max) or lower (min)."""
    model_name: str
    version: str
    alias: str
    value: float
    champion_version: str | None
    champion_value: float | None  # the champion scored on this test split
    champion_recorded_value: float | None  # what the champion scored on its own split when it was registered
    min_delta: float
    test_split: str
    note: str = ""
    metric: str = DEFAULT_METRIC
    mode: str = "max"

    @property
    def champion_accuracy(self) -> float | None:  # the records' name before registry.metric
        return self.champion_value

    def label(self) -> str:
        """The metric as the line says it: "test accuracy" for a classifier's default, else its name and way."""
        if (self.metric, self.mode) == (DEFAULT_METRIC, "max"):
            return "test accuracy"
        return f"{self.metric} ({'lower' if self.mode == 'min' else 'higher'} is better)"

    def sentence(self) -> str:
        """One line for logs and summaries."""
        if self.champion_version is None:
            return f"{self.model_name} v{self.version} is {CHAMPION}: first model ({self.label()} {self.value:.4f})"
        verb = "promoted to" if self.alias == CHAMPION else "kept as"
        if self.champion_value is None:
            return f"{self.model_name} v{self.version} {verb} {self.alias}: {self.note}"
        return (f"{self.model_name} v{self.version} {verb} {self.alias}: {self.label()} {self.value:.4f} vs "
                f"{CHAMPION} v{self.champion_version} {self.champion_value:.4f} on the same test split "
                f"(min_delta {self.min_delta})")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, saved: dict[str, object]) -> "GateDecision":
        """A decision as_dict wrote (gate.json), also one written before registry.metric (test_accuracy ...)."""
        renamed = {"test_accuracy": "value", "champion_accuracy": "champion_value",
                   "champion_recorded_accuracy": "champion_recorded_value"}
        known = {field.name for field in fields(cls)}
        given = {renamed.get(key, key): value for key, value in saved.items()}
        return cls(**{key: value for key, value in given.items() if key in known})  # type: ignore[arg-type]


class _PyfuncFlavor:
    """mlflow.pyfunc as the flavor of Model.log, without MLflow's check of the input example: that check loads the
    model in the logging process (TensorFlow: 2 s of a core, in a process that otherwise never imports it), and
    export's fresh process has already run the SavedModel's serving signature on test images."""
    __name__ = "mlflow.pyfunc"

    @staticmethod
    def save_model(validate_serving_input: bool = False, **kwargs: Any) -> None:
        import mlflow.pyfunc
        mlflow.pyfunc.save_model(**kwargs)


def encoded_examples(images: np.ndarray) -> list[bytes]:
    """Float images (0..255) as PNG bytes: the registered model's input example, as a client sends images."""
    import io

    from PIL import Image
    examples = []
    for image in np.clip(np.rint(images), 0, 255).astype(np.uint8):
        out = io.BytesIO()
        Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(out, "PNG")
        examples.append(out.getvalue())
    return examples


@dataclass(frozen=True)
class ModelKind:
    """What a registered model takes and gives: an image model (feature_shape None), or a tensor model's one
    example's feature shape; its task and its number of outputs (classes or targets)."""
    task: str = "classification"
    feature_shape: tuple[int, ...] | None = None
    outputs: int = 0


def model_kind(manifest: dict[str, Any], task: str) -> ModelKind:
    """The kind of model trained on this prepared data for `task`."""
    from trainer.prepared_data import data_kind, feature_shape, output_size
    shape = feature_shape(manifest) if data_kind(manifest) == "tensor" else None
    return ModelKind(task, shape, output_size(manifest, task))


def tensor_signature(kind: ModelKind) -> Any:
    """A tensor model's pyfunc signature: float32 features [-1, *feature_shape] (unnamed: a list of rows, or a
    DataFrame of feature columns) in; a regressor's predictions [-1, k] out, a classifier's as an image model's."""
    import numpy
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec
    assert kind.feature_shape is not None
    inputs = Schema([TensorSpec(numpy.dtype(numpy.float32), (-1, *kind.feature_shape))])
    if kind.task == "classification":
        return ModelSignature(inputs=inputs, outputs=serving_signature().outputs)
    return ModelSignature(inputs=inputs, outputs=Schema([TensorSpec(numpy.dtype(numpy.float32), (-1, kind.outputs))]))


def serving_signature() -> Any:
    """The pyfunc model's signature: encoded images (or float pixels) in; class, score, each class's probability
    and an error per image out (tasks/outputs/serving_model.py)."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Array, ColSpec, DataType, Map, Schema

    from tasks.outputs.serving_model import IMAGE, PIXELS
    pixels = Array(DataType.float)  # one image per row, flattened (MLflow checks nested arrays of numbers badly)
    return ModelSignature(
        inputs=Schema([ColSpec(DataType.binary, IMAGE, required=False), ColSpec(pixels, PIXELS, required=False)]),
        outputs=Schema([ColSpec(DataType.string, "class"), ColSpec(DataType.double, "score"),
                        ColSpec(Map(DataType.double), "probabilities"), ColSpec(DataType.string, "error")]))


def log_registered_model(run_id: str, savedmodel: Path, examples: np.ndarray, class_names: list[str],
                         model_name: str, kind: ModelKind = ModelKind(),
                         own_score: tuple[str, str, float] | None = None) -> str:
    """Log the SavedModel as a pyfunc MLflow model of the run (its signature; its input example: the `examples`
    images as PNG bytes, or a tensor model's features; the class names, task and kind in its config) and register
    it, its digest signed (sign_version), and its `own_score` (test split, score name, value) when given; returns
    the version. The run stays RUNNING: it finishes when the whole pipeline has."""
    from importlib.metadata import version as installed

    import mlflow
    import pandas as pd
    from mlflow.models import Model

    from tasks.outputs.serving_model import IMAGE
    key, digest = registry_signature.pipeline_key(), registry_signature.savedmodel_digest(savedmodel)
    mlflow.set_tracking_uri(mlflow_store.tracking_uri())
    mlflow.start_run(run_id=run_id)
    try:
        info = Model.log(
            artifact_path=None, name=MODEL_ARTIFACT, flavor=_PyfuncFlavor, flavor_name="pyfunc.ModelFromCode",
            python_model=str(SERVING_MODEL_FILE), artifacts={"savedmodel": str(savedmodel)},
            model_config={CLASSES_KEY: class_names, "task": kind.task,
                          "kind": "image" if kind.feature_shape is None else "tensor"},
            signature=serving_signature() if kind.feature_shape is None else tensor_signature(kind),
            input_example=pd.DataFrame({IMAGE: encoded_examples(examples)}) if kind.feature_shape is None
            else np.asarray(examples, np.float32),
            pip_requirements=[f"tensorflow=={installed('tensorflow')}", f"mlflow=={mlflow.__version__}", "pandas"],
            registered_model_name=model_name, validate_serving_input=False)
    finally:
        mlflow.end_run(status="RUNNING")
    version = str(info.registered_model_version)
    sign_version(key, model_name, version, digest, class_names, own_score)
    return version


def sign_version(key: bytes, model_name: str, version: str, digest: str, class_names: list[str],
                 own_score: tuple[str, str, float] | None = None) -> None:
    """Record on the version the SavedModel's digest and the pipeline's signature of it (registry_signature: what
    the model server checks before it loads a version), and its own signed score on its test split."""
    client = mlflow_store.client()
    tags = registry_signature.version_tags(key, model_name, version, digest, class_names)
    if own_score:
        tags |= registry_signature.signed_score(key, model_name, version, digest, *own_score)
    for name, value in tags.items():
        client.set_model_version_tag(model_name, version, name, value)


def recorded_score(version: Any, test_split: str, score_name: str) -> float | None:
    """A version's score `score_name` on the test split as the pipeline recorded and signed it (at its registration,
    or when a gate scored it); None when there is none that holds with this host's key."""
    try:
        key = registry_signature.read_key()
    except registry_signature.Untrusted:
        return None
    return registry_signature.verified_score(key, version.name, str(version.version), dict(version.tags),
                                             test_split, score_name)


def record_score(version: Any, test_split: str, score_name: str, value: float) -> None:
    """Sign and record a version's score on a test split (its SavedModel's digest was verified when it was scored)."""
    digest = dict(version.tags).get(registry_signature.DIGEST_TAG, "")
    tags = registry_signature.signed_score(registry_signature.pipeline_key(), version.name, str(version.version),
                                           digest, test_split, score_name, value)
    for name, text in tags.items():
        mlflow_store.client().set_model_version_tag(version.name, str(version.version), name, text)


def current_champion(model_name: str) -> Any | None:
    """The model version holding the `champion` alias; None only when there is none (other errors propagate)."""
    from mlflow.exceptions import MlflowException
    try:
        return mlflow_store.client().get_model_version_by_alias(model_name, CHAMPION)
    except MlflowException as error:
        no_model = error.error_code == "RESOURCE_DOES_NOT_EXIST"
        no_alias = error.error_code == "INVALID_PARAMETER_VALUE" and f"alias {CHAMPION} not found" in str(error)
        if no_model or no_alias:
            return None
        raise


def recorded_value(version: Any, metric: str = DEFAULT_METRIC) -> float | None:
    """The test metric a version had on its own run's test split (None: its run has none of that name)."""
    recorded = version.tags.get(metric)
    if recorded:
        return float(recorded)
    value = mlflow_store.client().get_run(version.run_id).data.metrics.get(metric)
    return None if value is None else float(value)


def recorded_accuracy(version: Any) -> float | None:
    """The test accuracy a version had on its own run's test split."""
    return recorded_value(version, DEFAULT_METRIC)


def decide_gate(model_name: str, version: str, value: float, min_delta: float, test_split: str,
                score_champion: Callable[[Any], float | None], metric: str = DEFAULT_METRIC,
                mode: str = "max") -> GateDecision:
    """Compare the new version's `value` of `metric` with the champion's scored on the same test split
    (score_champion), better by min_delta in `mode`'s direction; a champion that cannot score this split (other
    inputs, outputs or task), or that the pipeline did not sign (never run), does not block the new version."""
    champion = current_champion(model_name)
    if champion is None:
        return GateDecision(model_name, version, CHAMPION, value, None, None, None, min_delta, test_split, "",
                            metric, mode)
    try:
        now = score_champion(champion)
    except registry_signature.Untrusted as error:  # not run on this host: it does not block the pipeline's version
        return GateDecision(model_name, version, CHAMPION, value, str(champion.version), None, None, min_delta,
                            test_split, f"{CHAMPION} v{champion.version} not scored: {error}", metric, mode)
    note = "" if now is not None else f"{CHAMPION} v{champion.version} cannot score this test split (other inputs)"
    gain = (value - now if mode == "max" else now - value) if now is not None else 0.0
    promote = now is None or gain >= min_delta
    return GateDecision(model_name, version, CHAMPION if promote else CHALLENGER, value, str(champion.version), now,
                        recorded_value(champion, metric), min_delta, test_split, note, metric, mode)


def apply_gate(decision: GateDecision) -> None:
    """Record the decision on the new version and give it its alias (a classifier's by default as ever:
    test_accuracy, gate.champion_accuracy ...; another metric's by its name, and the metric and its mode)."""
    client = mlflow_store.client()
    short = short_name(decision.metric)
    tags = {decision.metric: decision.value, "gate.decision": decision.alias,
            "gate.min_delta": decision.min_delta, "gate.champion_version": decision.champion_version,
            f"gate.champion_{short}": decision.champion_value,
            f"gate.champion_recorded_{short}": decision.champion_recorded_value,
            "gate.test_split": decision.test_split, "gate.metric": decision.metric, "gate.mode": decision.mode}
    for key, value in tags.items():
        client.set_model_version_tag(decision.model_name, decision.version, key, "" if value is None else str(value))
    client.set_registered_model_alias(decision.model_name, decision.alias, decision.version)


def score_registered_model(version: Any, data_dir: Path, score: Callable[[Path, Path], float | None]) -> float | None:
    """Test accuracy of a registered model version's SavedModel on the prepared test split, as `score` (savedmodel,
    data dir) gives it (export's fresh process); None when it cannot score it (other input channels or classes).
    Untrusted, before anything runs it, when the version is not one the pipeline signed (verified_download)."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        savedmodel, _ = verified_download(version.name, str(version.version), Path(folder))
        return score(savedmodel, data_dir)


def verified_download(model_name: str, version: str, folder: Path) -> tuple[Path, list[str]]:
    """A version's MLflow model downloaded into `folder`, when it is the pipeline's: its one SavedModel's folder and
    its class names (from the MLmodel file's YAML; nothing of it is run). registry_signature.Untrusted: before
    anything is downloaded when the version carries no signature or this host has no key; after, when it is not
    ringflow's image model or its SavedModel and class names are not the ones the pipeline signed for it."""
    import mlflow
    from mlflow.artifacts import download_artifacts
    from mlflow.models import Model
    tags = dict(mlflow_store.client().get_model_version(model_name, version).tags)
    registry_signature.refuse_unsigned(model_name, version, tags)
    key = registry_signature.read_key()
    mlflow.set_tracking_uri(mlflow_store.tracking_uri())  # models:/ URIs are read from the registry of this URI
    model_dir = Path(download_artifacts(artifact_uri=f"models:/{model_name}/{version}", dst_path=str(folder),
                                        tracking_uri=mlflow_store.tracking_uri()))
    config = Model.load(str(model_dir)).flavors.get("python_function", {}).get("config") or {}
    savedmodels = [path.parent for path in model_dir.rglob("saved_model.pb")]
    if CLASSES_KEY not in config or len(savedmodels) != 1:
        raise registry_signature.Untrusted(f"{model_name} v{version} is not a ringflow model (no SavedModel with "
                                           "class names): register a model made by this pipeline")
    class_names = [str(name) for name in config[CLASSES_KEY]]
    registry_signature.verify(key, model_name, version, tags, savedmodels[0], class_names)
    return savedmodels[0], class_names
