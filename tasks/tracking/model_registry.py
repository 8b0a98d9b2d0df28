"""register: the exported SavedModel as an MLflow model (signature, input example) in the registry, and the
promotion gate: alias `champion` moves to a new version only if its test accuracy beats the champion's by at
least `min_delta`; otherwise the new version is the `challenger`."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tasks.paths import ROOT
from tasks.tracking import mlflow_store

MODEL_ARTIFACT = "mlflow-model"
SERVING_MODEL_FILE = ROOT / "tasks" / "outputs" / "serving_model.py"  # the pyfunc model, logged as code
CHAMPION, CHALLENGER = "champion", "challenger"


@dataclass(frozen=True)
class GateDecision:
    """Which alias a new model version got, and the numbers that decided it."""
    model_name: str
    version: str
    alias: str
    test_accuracy: float
    champion_version: str | None
    champion_accuracy: float | None
    min_delta: float

    def sentence(self) -> str:
        """One line for logs and summaries."""
        if self.champion_accuracy is None:
            return (f"{self.model_name} v{self.version} is {CHAMPION}: first model "
                    f"(test accuracy {self.test_accuracy:.4f})")
        verb = "promoted to" if self.alias == CHAMPION else "kept as"
        return (f"{self.model_name} v{self.version} {verb} {self.alias}: test accuracy {self.test_accuracy:.4f} vs "
                f"{CHAMPION} v{self.champion_version} {self.champion_accuracy:.4f} (min_delta {self.min_delta})")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def log_registered_model(run_id: str, savedmodel: Path, example: np.ndarray, model_name: str) -> str:
    """Log the SavedModel as a pyfunc MLflow model of the run (signature, input example); returns the version."""
    import mlflow
    import tensorflow as tf
    from mlflow.models import infer_signature

    serve = tf.saved_model.load(str(savedmodel)).signatures["serving_default"]
    probabilities = serve(images=tf.constant(example, dtype=tf.float32))["probabilities"].numpy()
    mlflow.set_tracking_uri(mlflow_store.tracking_uri())
    with mlflow.start_run(run_id=run_id):
        info = mlflow.pyfunc.log_model(
            name=MODEL_ARTIFACT, python_model=str(SERVING_MODEL_FILE), artifacts={"savedmodel": str(savedmodel)},
            signature=infer_signature(example, probabilities),
            input_example=example, pip_requirements=[f"tensorflow=={tf.__version__}", f"mlflow=={mlflow.__version__}"],
            registered_model_name=model_name)
    return str(info.registered_model_version)


def current_champion(model_name: str) -> tuple[str, float] | None:
    """(version, test accuracy) of the version holding the `champion` alias, if any."""
    from mlflow.exceptions import MlflowException
    client = mlflow_store.client()
    try:
        version = client.get_model_version_by_alias(model_name, CHAMPION)
    except MlflowException:
        return None
    accuracy = version.tags.get("test_accuracy") or client.get_run(version.run_id).data.metrics["test_accuracy"]
    return str(version.version), float(accuracy)


def apply_gate(model_name: str, version: str, test_accuracy: float, min_delta: float) -> GateDecision:
    """Give the new version `champion` or `challenger` and record the decision on the version."""
    champion = current_champion(model_name)
    promote = champion is None or test_accuracy - champion[1] >= min_delta
    decision = GateDecision(model_name, version, CHAMPION if promote else CHALLENGER, test_accuracy,
                            champion[0] if champion else None, champion[1] if champion else None, min_delta)
    client = mlflow_store.client()
    tags = {"test_accuracy": test_accuracy, "gate.decision": decision.alias, "gate.min_delta": min_delta,
            "gate.champion_version": decision.champion_version, "gate.champion_accuracy": decision.champion_accuracy}
    for key, value in tags.items():
        client.set_model_version_tag(model_name, version, key, "" if value is None else str(value))
    client.set_registered_model_alias(model_name, decision.alias, version)
    return decision
