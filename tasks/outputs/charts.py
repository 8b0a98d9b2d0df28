"""PNG charts for MLflow and the Prefect UI (matplotlib, no display)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(figure: Any, path: Path) -> Path:
    """Write the figure as a PNG and free it."""
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot().close(figure)
    return path


def confusion_matrix_png(matrix: np.ndarray, class_names: list[str], path: Path) -> Path:
    """Counts of true (rows) vs predicted (columns) classes, as a heat map with numbers."""
    plt = pyplot()
    size = max(4.0, 0.45 * len(class_names) + 2)
    figure, axis = plt.subplots(figsize=(size, size))
    axis.imshow(matrix, cmap="Blues")
    ticks = np.arange(len(class_names))
    axis.set_xticks(ticks, class_names, rotation=90 if len(class_names) > 10 else 0)
    axis.set_yticks(ticks, class_names)
    axis.set_xlabel("predicted")
    axis.set_ylabel("true")
    if len(class_names) <= 30:
        threshold = matrix.max() / 2 if matrix.size else 0
        for (row, column), count in np.ndenumerate(matrix):
            axis.text(column, row, str(count), ha="center", va="center", fontsize=7,
                      color="white" if count > threshold else "black")
    axis.set_title("confusion matrix (test)")
    return save(figure, path)


def training_curves_png(history: dict[str, list[float]], path: Path) -> Path:
    """Loss and accuracy (a regressor's: MAE) per epoch, training and validation."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for axis, metric in zip(axes, ("loss", "mae" if "mae" in history and "accuracy" not in history else "accuracy")):
        for key, style in ((metric, "-"), (f"val_{metric}", "--")):
            if history.get(key):
                epochs = np.arange(1, len(history[key]) + 1)
                axis.plot(epochs, history[key], style, marker="o", markersize=3, label=key)
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.legend()
    return save(figure, path)
