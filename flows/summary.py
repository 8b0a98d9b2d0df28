"""Markdown and table text for the Prefect UI (pure functions: no Prefect, no TensorFlow)."""
from __future__ import annotations

from typing import Any

SHOWN_TRAIN_PARAMS = ("backend", "np", "model", "epochs", "batch_size", "learning_rate", "precision")


def _data_shape(report: dict[str, Any]) -> str:
    """What the validated data holds: classes and image shape, or (tensor data) the task and its shapes."""
    if report.get("kind", "image") == "image":
        return f"{report['classes']} classes, image shape {report['image_shape']}"
    classes = f", {report['classes']} classes" if report.get("task") == "classification" else ""
    return f"{report['task']}{classes}, feature shape {report['feature_shape']}, targets {report['target_shape']}"


def validation_markdown(report: dict[str, Any], skipped: bool) -> str:
    """The validation report as a markdown table, and the images conversion left out, if any."""
    rows = [f"| {split} | {s['records']} | {s['shards']} | {s['bytes']:,} |" for split, s in report["splits"].items()]
    bad = report.get("skipped_images", [])
    left_out = ["", f"**{len(bad)} image(s) left out** (data.bad_images: skip):", "",
                *[f"- `{image['file']}`: {image['reason']}" for image in bad[:50]]] if bad else []
    return "\n".join([f"### Data validation: {report['source']} — valid", "",
                      f"{_data_shape(report)}, "
                      f"conversion {'skipped (up to date)' if skipped else 'done'}", "",
                      "| split | records | shards | bytes |", "| --- | --- | --- | --- |", *rows, *left_out])


def epoch_rows(history: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per epoch of the training history (values rounded for display)."""
    epochs = max((len(values) for values in history.values()), default=0)
    return [{"epoch": epoch + 1, **{key: round(float(values[epoch]), 5) for key, values in history.items()
                                    if epoch < len(values)}} for epoch in range(epochs)]


def _state_lines(state: dict[str, str]) -> list[str]:
    return [f"- data (DVC hash): `{state['data_hash']}`", f"- code (digest of the packages and pinned "
            f"dependencies): `{state['code_digest']}`", f"- params hash: `{state['params_hash']}`"]


def changes_line(changes: list[str]) -> str:
    """Which of data, code and params changed since the last finished run."""
    if not changes:
        return "Changed since the last finished run: nothing (trained on request)"
    return f"Changed since the last finished run: {', '.join(changes)}"


def run_markdown(result: dict[str, Any], train_params: dict[str, Any], state: dict[str, str], changes: list[str],
                 link: str) -> str:
    """The summary of a pipeline run that trained: versions and what changed, params, metrics, gate, MLflow link."""
    metrics = [f"| {key} | {value:.4f} |" for key, value in sorted(result["metrics"].items())]
    params = [f"| {key} | {train_params[key]} |" for key in SHOWN_TRAIN_PARAMS]
    return "\n".join([f"## Training run [{result['run_id']}]({link})", "", changes_line(changes), "",
                      *_state_lines(state), "",
                      "| param | value |", "| --- | --- |", *params, "",
                      "| test metric | value |", "| --- | --- |", *metrics, "",
                      f"**Gate:** {result['gate']}", "", f"DVC: {result['dvc_record']}", "",
                      f"SavedModel: `{result['savedmodel']}`"])


def skipped_markdown(previous_run: str, state: dict[str, str], link: str) -> str:
    """The summary of a retraining that found nothing changed."""
    return "\n".join(["## Training skipped: nothing changed", "",
                      f"Data, code and params are those of the last successful run [{previous_run}]({link}):", "",
                      *_state_lines(state), "", "Run with `force=true` to train anyway."])
