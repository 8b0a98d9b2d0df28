"""The comparison of one window's served items with the served version's reference: the columns both hold, Evidently's
report (run by its own venv), the figures, and the verdict against monitor.threshold and monitor.answer_threshold."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.params import MonitorParams
from tasks.paths import ROOT

FEATURES = ("mean", "spread", "minimum", "maximum")  # the summary features a column of both may hold
ANSWER, SCORE = "answer", "score"


class CompareFailed(RuntimeError):
    """Evidently's report could not be made."""


@dataclass(frozen=True)
class Comparison:
    """What a window's items showed against the reference."""
    items: int  # the window's items the version answered (those it could not use are not compared)
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)  # each column's test, value, threshold, drifted
    drifting: list[str] = field(default_factory=list)  # the numerical columns that drifted
    share: float = 0.0  # drifting / numerical columns
    answer_distance: float | None = None  # the answers' Jensen-Shannon distance (None: a regressor's, no answers)

    def drifted(self, settings: MonitorParams) -> bool:
        return self.share >= settings.threshold or (self.answer_distance or 0.0) >= settings.answer_threshold

    def shown(self, settings: MonitorParams) -> str:
        """The comparison in a few words: the drifting columns of how many, the answers' distance."""
        numerical = len(self.columns) - (self.answer_distance is not None)
        said = f"{len(self.drifting)} of {numerical} columns drift ({', '.join(self.drifting) or 'none'}; " \
               f"threshold {settings.threshold:g})"
        if self.answer_distance is not None:
            said += f", answers at distance {self.answer_distance:.3f} (threshold {settings.answer_threshold:g})"
        return said


def compared_columns(reference: Any, current: Any) -> tuple[list[str], str | None]:
    """(numerical columns, the answer column or None) that the reference and the window both hold values of."""
    def held(name: str) -> bool:
        return name in reference and name in current and reference[name].notna().all() and \
            current[name].notna().all()
    numerical = [name for name in (*FEATURES, SCORE) if held(name)]
    answered = held(ANSWER) and (reference[ANSWER] != "").any()
    return numerical, ANSWER if answered else None


def compare(reference: Any, current: Any, settings: MonitorParams, folder: Path) -> Comparison:
    """Evidently's drift report of the window (`current`) against `reference` into `folder` (report.html)."""
    from tasks.monitoring.evidently_env import evidently_python
    numerical, answer = compared_columns(reference, current)
    chosen = [*numerical, *([answer] if answer else [])]
    reference[chosen].to_parquet(folder / "reference.parquet")
    current[chosen].to_parquet(folder / "current.parquet")
    (folder / "request.json").write_text(json.dumps({"numerical": numerical, "answer": answer,
                                                     "drift_share": settings.threshold,
                                                     "answer_threshold": settings.answer_threshold}))
    done = subprocess.run([str(evidently_python()), "-m", "tasks.monitoring.drift_report", str(folder)], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()] or ["no output"]
        raise CompareFailed(f"Evidently's drift report failed: {said[-1]}")
    summary = json.loads((folder / "summary.json").read_text())
    return Comparison(len(current), summary["columns"], summary["drifting"], summary["share"],
                      summary["answer_distance"])


def drift_figures(reference: Any, current: Any, folder: Path) -> list[Path]:
    """PNG figures beside Evidently's HTML: each compared numerical column's distribution (reference against the
    window) and the answers' shares."""
    from tasks.outputs.charts import pyplot, save
    plt = pyplot()
    numerical, answer = compared_columns(reference, current)
    figure, axes = plt.subplots(1, len(numerical), figsize=(3.6 * len(numerical), 3.2), squeeze=False)
    for axis, name in zip(axes[0], numerical):
        axis.hist([reference[name], current[name]], bins=20, density=True, label=["reference", "window"])
        axis.set_title(name)
        axis.legend(fontsize=7)
    paths = [save(figure, folder / "features.png")]
    if answer:
        shares = [column.value_counts(normalize=True) for column in (reference[answer], current[answer])]
        names = sorted(set(shares[0].index) | set(shares[1].index))
        figure, axis = plt.subplots(figsize=(max(4.0, 0.5 * len(names) + 2), 3.2))
        for offset, (share, label) in enumerate(zip(shares, ("reference", "window"))):
            axis.bar([index + 0.4 * offset for index in range(len(names))], [share.get(name, 0) for name in names],
                     width=0.4, label=label)
        axis.set_xticks([index + 0.2 for index in range(len(names))], names, rotation=90 if len(names) > 10 else 0)
        axis.set_title("answers")
        axis.legend(fontsize=7)
        paths.append(save(figure, folder / "answers.png"))
    return paths
