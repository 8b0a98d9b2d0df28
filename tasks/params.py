"""The validated parameter model: params.yaml defaults plus per-run overrides."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tasks.paths import PARAMS_FILE
from trainer.models import MODEL_BUILDERS

DATASET_KINDS = ("digits", "tfds:<name>[:<version>]", "folder:<path>", "npz:<path>")


class ParamsError(ValueError):
    """Bad parameters; str() is one line that names the problem."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataParams(_Section):
    dataset: str = "digits"
    data_dir: str = "data/tfds"
    download: bool = True
    val_fraction: float = Field(0.15, gt=0, lt=0.5)
    test_fraction: float = Field(0.15, gt=0, lt=0.5)
    min_shards: int = Field(8, ge=1)
    shard_bytes: int = Field(100_000_000, ge=1024)
    workers: int = Field(0, ge=0)
    seed: int = 42

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, value: str) -> str:
        from tasks.sources import parse_dataset, resolve_path
        kind, argument = parse_dataset(value)
        if kind == "digits" and not argument:
            return value
        if kind not in ("tfds", "folder", "npz") or not argument:
            raise ValueError(f"unknown dataset {value!r}; known: {', '.join(DATASET_KINDS)}")
        path = resolve_path(argument)
        if kind == "folder" and not path.is_dir():
            raise ValueError(f"image folder {path} does not exist")
        if kind == "npz" and not path.is_file():
            raise ValueError(f"npz file {path} does not exist")
        return value


class InputParams(_Section):
    """The trainer's input pipeline."""
    image_size: int | None = Field(None, ge=8)  # square size the model sees; None: the data's own size
    augment: Literal["auto", "on", "off"] = "auto"  # auto: on for image folders and images >= 64 px
    cache: bool = True  # keep decoded training images in memory after the first epoch


class TrainParams(_Section):
    backend: Literal["horovod", "horovod-tape", "mirrored", "multiworker", "central-storage", "one-device",
                     "parameter-server"] = "horovod"
    np: int = Field(2, ge=1)  # Horovod ranks, multiworker / parameter-server workers, or local replicas
    hosts: str | None = None  # "h1:4,h2:4" (horovod: slots; multiworker: one worker per listed slot)
    hostfile: str | None = None  # horovodrun hostfile ("host slots=N" lines)
    controller: Literal["auto", "gloo", "mpi"] = "auto"  # auto: MPI when built and mpirun exists, else Gloo
    horovodrun_args: list[str] = []  # passed through to horovodrun
    num_ps: int = Field(1, ge=1)  # parameter-server: parameter servers
    model: str = "cnn"
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(32, ge=1)  # per replica
    learning_rate: float = Field(0.001, gt=0)  # for one replica
    scale_lr: bool = True  # linear rule: x replicas
    warmup_epochs: float = Field(2.0, ge=0)
    precision: Literal["fp32", "mixed_float16", "mixed_bfloat16"] = "fp32"
    jit_compile: bool = False
    steps_per_execution: int = Field(4, ge=1)  # Keras fit backends: training steps per compiled call
    fp16_allreduce: bool = False  # Horovod: compress gradients to fp16 for the allreduce
    seed: int = 42
    keep_checkpoints: int = Field(3, ge=1)
    resume: bool = True  # a relaunch with the same config continues from its latest checkpoint
    scaling_np: list[int] = [1, 2]  # the scaling flow's process counts

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODEL_BUILDERS:
            raise ValueError(f"unknown model {value!r}; known: {', '.join(sorted(MODEL_BUILDERS))}")
        return value

    @field_validator("scaling_np")
    @classmethod
    def _positive_counts(cls, value: list[int]) -> list[int]:
        if not value or min(value) < 1:
            raise ValueError("scaling_np needs one or more counts >= 1")
        return value


class TrackingParams(_Section):
    experiment: str = Field("ringflow", min_length=1)
    ui_url: str = "http://127.0.0.1:5000"  # where `make ui` serves MLflow (links in the Prefect summary)


class RegistryParams(_Section):
    """The MLflow model registry and its promotion gate."""
    model_name: str = Field("ringflow", min_length=1)
    min_delta: float = Field(0.001, ge=0)  # test accuracy a new model must gain over `champion` to replace it


class PipelineParams(_Section):
    """How the Prefect flow runs the steps."""
    train_retries: int = Field(1, ge=0)  # a failed training is retried and resumes from its last checkpoint
    retry_delay_seconds: float = Field(5, ge=0)


class Params(_Section):
    data: DataParams = DataParams()
    input: InputParams = InputParams()
    train: TrainParams = TrainParams()
    tracking: TrackingParams = TrackingParams()
    registry: RegistryParams = RegistryParams()
    pipeline: PipelineParams = PipelineParams()

    def flat(self) -> dict[str, Any]:
        """Dotted keys to values, as logged to MLflow (`train.epochs` -> 20)."""
        return {f"{section}.{key}": value
                for section, values in self.model_dump().items() for key, value in values.items()}


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    extra = "" if isinstance(value, dict) or repr(value) in message else f" (got {value!r})"
    return f"bad parameter {where}: {message}{extra}"


def _parse_value(text: str) -> Any:
    """A command-line value as YAML reads it (`3`, `true`, `null`, `[1, 2]`); a mapping (`tfds:`) stays text."""
    try:
        value = yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text
    return text if isinstance(value, dict) else value


def _full_key(key: str) -> tuple[str, str]:
    """`epochs` or `train.epochs` -> ('train', 'epochs'); unknown or ambiguous keys fail."""
    if "." in key:
        section, name = key.split(".", 1)
        if section in Params.model_fields and name in Params.model_fields[section].annotation.model_fields:
            return section, name
        raise ParamsError(f"bad parameter {key}: no such parameter")
    sections = [s for s, f in Params.model_fields.items() if key in f.annotation.model_fields]
    if len(sections) != 1:
        raise ParamsError(f"bad parameter {key}: " + ("no such parameter" if not sections else "ambiguous, prefix a section"))
    return sections[0], key


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of the raw params with `{'train.epochs': 3}`-style overrides applied."""
    merged = {section: dict(values or {}) for section, values in raw.items()}
    for key, value in overrides.items():
        section, name = _full_key(key)
        merged.setdefault(section, {})[name] = _parse_value(value) if isinstance(value, str) else value
    return merged


def parse_assignments(assignments: list[str]) -> dict[str, str]:
    """`['train.epochs=3']` -> `{'train.epochs': '3'}`."""
    pairs = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"bad override {item!r}: expected KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def load_params(overrides: dict[str, Any] | None = None, path: Path = PARAMS_FILE) -> Params:
    """params.yaml with overrides, validated; raises ParamsError with one clear line."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ParamsError(f"cannot read {path}: {error}") from error
    try:
        return Params.model_validate(apply_overrides(raw, overrides or {}))
    except ValidationError as error:
        raise ParamsError(_one_line(error)) from None
