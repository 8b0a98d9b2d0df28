"""The report charts: a confusion matrix and training curves, each a PNG file written atomically."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.outputs.charts import confusion_matrix_png, training_curves_png

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_charts_are_png_files(tmp_path: Path) -> None:
    matrix = np.array([[5, 1], [0, 4]])
    confusion = confusion_matrix_png(matrix, ["cat", "dog"], tmp_path / "confusion.png")
    curves = training_curves_png({"loss": [1.0, 0.5], "val_loss": [1.1, 0.7], "accuracy": [0.5, 0.8],
                                  "val_accuracy": [0.4, 0.7]}, tmp_path / "curves.png")
    for path in (confusion, curves):
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5000
    assert sorted(path.name for path in tmp_path.iterdir()) == ["confusion.png", "curves.png"]  # no temporary left
