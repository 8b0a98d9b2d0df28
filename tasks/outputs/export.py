"""export: the SavedModel (serving signature) the training's lead process wrote, published once its reload from
its files agrees with the trained model's outputs. The lead process reloads it right after writing it (its
TensorFlow is loaded: no other process pays a TensorFlow import for it); a model directory without that check (one
trained before it was made) is reloaded here, in a separate, fresh process.

The fresh process (tasks/outputs/serve_check.py) also scores the champion for register's gate when the registry holds
no score of it on the run's test split, and builds a user's model in the preflight."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.atomic import atomic_dir
from tasks.paths import ROOT
from trainer.model_outputs import PARITY_SAMPLE, SAVEDMODEL

PARITY_TOLERANCE = 1e-5


@dataclass(frozen=True)
class ExportResult:
    """The SavedModel and how closely its reload matched the trained model."""
    path: Path
    max_abs_diff: float
    checked_images: int


class NoSavedModel(RuntimeError):
    """The model directory lacks the SavedModel its training writes."""
    bad_input = True


def reloaded_sample(model_dir: Path) -> np.ndarray | None:
    """The reloaded SavedModel's outputs for the parity sample, as the lead process wrote them (None: it did not)."""
    with np.load(Path(model_dir) / PARITY_SAMPLE) as saved:
        return saved["reloaded"] if "reloaded" in saved.files else None


def parity_sample(model_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(test images, the trained model's probabilities for them) that the lead process wrote beside the model."""
    path = Path(model_dir) / PARITY_SAMPLE
    if not path.is_file() or not (Path(model_dir) / SAVEDMODEL).is_dir():
        raise NoSavedModel(f"no SavedModel: {Path(model_dir) / SAVEDMODEL} or {path} is missing (its training wrote "
                           f"none: train again)")
    with np.load(path) as saved:
        return saved["images"], saved["probabilities"]


class FreshProcess:
    """A fresh Python process that loads SavedModels (tasks/outputs/serve_check.py): started ahead (it imports
    TensorFlow meanwhile), then asked one request at a time (a sweep's trials ask from threads of their own: one
    asking thread at a time, or one would read another's answer and the other wait for ever)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tasks.outputs.serve_check"], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.said: list[str] = []  # what it printed besides its answers (its error, when it fails)
        self._asking = threading.Lock()

    def ask(self, what: str, **request: Any) -> Any:
        """The answer to one request; RuntimeError naming the process's last line when it ends without one."""
        with self._asking:
            return self._asked(what, request)

    def _asked(self, what: str, request: dict[str, Any]) -> Any:
        from tasks.outputs.serve_check import ANSWER
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps({"ask": what, **request}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it ended: its output says why
        for line in self.process.stdout:
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER):])
            self.said.append(line.strip())
        self.process.wait()
        raise RuntimeError(f"the SavedModel's reload failed: {(self.said or ['no output'])[-1]}")

    def predictions(self, savedmodel: Path, images: np.ndarray, work_dir: Path) -> np.ndarray:
        images_file, out_file = work_dir / "images.npy", work_dir / "probabilities.npy"
        np.save(images_file, images)
        self.ask("predict", savedmodel=str(savedmodel), images=str(images_file), out=str(out_file))
        return np.load(out_file)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, wait: bool = True) -> None:
        """Ends at the end of its input."""
        if not self.alive():
            return
        if wait:
            self.process.communicate("", timeout=600)
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        threading.Thread(target=self._drained, name="fresh-process-end", daemon=True).start()

    def _drained(self) -> None:
        """Its last output read (it never blocks on a full pipe), its exit collected."""
        assert self.process.stdout is not None
        self.process.stdout.read()
        self.process.wait()


_fresh: list[FreshProcess] = []  # at most one: this pipeline run's, started ahead
_fresh_made = threading.Lock()  # a sweep's trials ask for it from threads of their own


def start_fresh_process_ahead() -> None:
    """Start the fresh process now: it imports TensorFlow on another core while this process waits for the
    training. Unused, it ends with this process (the end of its input)."""
    with _fresh_made:
        if not _fresh:
            _fresh.append(FreshProcess())


def fresh_process() -> FreshProcess:
    """The fresh process started ahead (if it is still alive), else a new one."""
    with _fresh_made:
        if _fresh and not _fresh[0].alive():
            _fresh.pop()
    start_fresh_process_ahead()
    return _fresh[0]


def close_fresh_process(wait: bool = True) -> None:
    """This run is done with it (the next run starts its own); without `wait`, it ends on its own (a TensorFlow
    process takes most of a second to end) and a thread collects its exit."""
    while _fresh:
        _fresh.pop().close(wait)


def export(model_dir: Path, export_dir: Path) -> ExportResult:
    """Publish the training's SavedModel to export_dir only after its reload (the lead process's, else a fresh
    process's) gives the trained model's outputs for the parity sample."""
    images, expected = parity_sample(model_dir)
    with tempfile.TemporaryDirectory() as work, atomic_dir(export_dir) as tmp:
        shutil.copytree(Path(model_dir) / SAVEDMODEL, tmp, dirs_exist_ok=True)
        reloaded = reloaded_sample(model_dir)
        if reloaded is None:
            reloaded = fresh_process().predictions(tmp, images, Path(work))
        max_abs_diff = float(np.max(np.abs(reloaded - expected))) if len(images) else 0.0
        if max_abs_diff > PARITY_TOLERANCE:
            raise RuntimeError(f"SavedModel reload differs from the trained model by {max_abs_diff:.3g}")
    return ExportResult(export_dir, max_abs_diff, len(images))
