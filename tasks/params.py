"""The validated parameter model: params.yaml plus per-run overrides.

The pydantic models hold the only defaults: the data, tracking, registry and pipeline sections here, the trainer's
train and input sections in trainer/config.py (the processes validate their file with the same models).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tasks.paths import PARAMS_FILE, resolve_path
from tasks.project import PROJECT_FORMAT
from tasks.redaction import holds_credentials
from trainer.choices import scheduler_spec
from trainer.config import InputParams, Section, TrainParams, literal_words
from trainer.serving_bytes import MAX_IMAGE_PIXELS

DATASET_KINDS = ("digits", "tfds:<name>[:<version>]", "folder:<path>", "npz:<path>", "table:<path>")


def parse_dataset(spec: str) -> tuple[str, str]:
    """`folder:/x` -> ('folder', '/x'); `digits` -> ('digits', '')."""
    kind, _, argument = spec.partition(":")
    return kind, argument


class ParamsError(ValueError):
    """Bad parameters; str() is one line that names the problem."""
    bad_input = True


class DataParams(Section):
    dataset: str = "digits"
    data_dir: str = "data/tfds"
    download: bool = True
    val_fraction: float = Field(0.15, gt=0, lt=0.5)
    test_fraction: float = Field(0.15, gt=0, lt=0.5)
    min_shards: int = Field(8, ge=1)
    shard_bytes: int = Field(100_000_000, ge=1024)
    workers: int = Field(0, ge=0)
    max_image_side: int = Field(0, ge=0)  # image files: a shorter side above it is scaled down to it; 0: as they are
    bad_images: Literal["fail", "skip"] = "fail"  # images that cannot be decoded: stop naming them, or leave them out
    features: list[str] | None = None  # table: the feature columns; None: every column but the target's
    target: list[str] | str | None = None  # table: the target column(s); None: the last column
    seed: int = 42

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, value: str) -> str:
        kind, argument = parse_dataset(value)
        if kind == "digits" and not argument:
            return value
        if kind not in ("tfds", "folder", "npz", "table") or not argument:
            raise ValueError(f"unknown dataset {value!r}; known: {', '.join(DATASET_KINDS)}")
        path = resolve_path(argument)
        if kind == "folder" and not path.is_dir():
            raise ValueError(f"image folder {path} does not exist")
        if kind == "npz" and not path.is_file():
            raise ValueError(f"npz file {path} does not exist")
        if kind == "table" and not path.is_file():
            raise ValueError(f"table file {path} does not exist")
        return value


TRACKING_SCHEMES = ("http://", "https://", "sqlite:///")


class TrackingParams(Section):
    experiment: str = Field("ringflow", min_length=1)
    ui_url: str = "http://127.0.0.1:5000"  # where `make ui` serves MLflow (links in the Prefect summary)
    uri: str | None = None  # an MLflow server (http://host:5000); None: MLFLOW_TRACKING_URI, else mlruns/mlflow.db
    retry_minutes: float = Field(5, gt=0)  # how long metrics wait for a tracking server that does not answer

    @field_validator("uri")
    @classmethod
    def _tracking_uri(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(TRACKING_SCHEMES):
            raise ValueError(f"{value!r} is not an MLflow tracking URI: http(s)://host:port or sqlite:///path")
        if holds_credentials(value):
            raise ValueError("holds credentials, which would be recorded with the run: give them as "
                             "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (make services writes them "
                             "into .services/client.env)")
        return value.rstrip("/")


class RegistryParams(Section):
    """The MLflow model registry and its promotion gate."""
    model_name: str = Field("ringflow", min_length=1)
    metric: str | None = None  # the test metric the gate compares; None: the task's (test_accuracy, test_mae)
    mode: Literal["auto", "max", "min"] = "auto"  # better is higher (max) or lower (min); auto: by the metric's name
    min_delta: float = Field(0.001, ge=0)  # what a new model must gain on `metric` over `champion` to replace it


class PipelineParams(Section):
    """How the Prefect flow runs the steps."""
    train_retries: int = Field(1, ge=0)  # a failed training is retried (same run, from its last checkpoint)
    retry_delay_seconds: float = Field(5, ge=0)


class ServingParams(Section):
    """make serve-model: the registry's champion over HTTP (servers/model/)."""
    host: str = Field("127.0.0.1", min_length=1)  # the address it listens on (0.0.0.0: every interface)
    port: int = Field(8501, ge=1, le=65535)  # TensorFlow Serving's REST port
    max_batch_size: int = Field(32, ge=1, le=1024)  # images the model is given at once, from any requests
    max_wait_ms: float = Field(2, ge=0, le=1000)  # how long a batch waits for more images once it has one
    max_instances: int = Field(64, ge=1)  # images in one request; more: the request is refused
    max_request_bytes: int = Field(32 * 2**20, ge=1024)  # a request's body; larger: refused before it is read
    poll_seconds: float = Field(30, ge=1)  # how often the registry is asked which version is the champion
    challenger: bool = False  # also serve the version holding the alias challenger (the gate's last one kept),
    # beside the champion: .../labels/challenger:predict, its version's paths; a second model in memory
    max_image_pixels: int = Field(MAX_IMAGE_PIXELS, ge=16, le=MAX_IMAGE_PIXELS)  # width x height an image's header
    # may declare; more: that image is refused before it is decoded. At most the default: the SavedModel's own
    # signature refuses over it wherever it is served (trainer/serving_bytes.py, baked in at export)
    max_connections: int = Field(256, ge=1)  # open connections and requests; more: 503 until some end
    read_timeout_seconds: float = Field(30, gt=0)  # a client's time to send a request's headers, then its body
    keep_alive_seconds: float = Field(5, gt=0)  # an idle connection between requests is closed after this
    max_queued_requests: int = Field(64, ge=1)  # requests waiting for the model; more: 429 (RESOURCE_EXHAUSTED)
    log_fraction: float = Field(1.0, ge=0, le=1)  # share of the served items logged (servers/model/prediction_log.py)
    log_max_per_second: float = Field(50, gt=0)  # items logged per second at most; past it, a sample of them
    log_dir: str | None = None  # where the hourly Parquet files go; None: outputs/predictions of the workspace


class MonitorParams(Section):
    """The monitor flow: the served items of the last window against the reference the training kept (Evidently)."""
    window_minutes: float = Field(60, gt=0)  # the served items of this many minutes before the monitor's run
    min_items: int = Field(100, ge=2)  # fewer items of the served version in the window: no verdict
    threshold: float = Field(0.5, gt=0, le=1)  # the share of drifting columns (features, score) that is drift
    answer_threshold: float = Field(0.2, gt=0, le=1)  # the answers' Jensen-Shannon distance that is drift
    retrain: str | None = "training-pipeline/retrain"  # the deployment a drift starts (once per window); None: the
    # monitor reports only

    @field_validator("retrain")
    @classmethod
    def _deployment_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", value):
            raise ValueError(f"{value!r} is no deployment's full name: FLOW/DEPLOYMENT, as training-pipeline/retrain")
        return value


SLURM_TIME = re.compile(r"(\d+-)?\d{1,3}:[0-5]\d:[0-5]\d")  # [days-]HH:MM:SS
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a partition, account or QOS: it reaches the batch script


class SlurmParams(Section):
    """The Slurm job of the training step (train.scheduler: slurm); np is nodes x tasks_per_node."""
    nodes: int = Field(2, ge=1)
    tasks_per_node: int = Field(1, ge=1)  # ranks (or workers) per node; on GPU clusters, its GPUs
    gpus_per_node: int = Field(0, ge=0)  # 0 on CPU clusters: no --gpus-per-node
    cpus_per_task: int = Field(1, ge=1)
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    qos: str | None = None
    time_limit: str | None = None  # [days-]HH:MM:SS; None: the partition's default
    pending_timeout_minutes: float = Field(30, gt=0)  # queued longer than this: the job is cancelled, the step fails
    requeue: bool = True  # on node failure or preemption Slurm requeues the job, which resumes from its checkpoint
    max_requeues: int = Field(3, ge=0)  # requeues (notices, node failures) before the job is given up on
    notice_seconds: int = Field(60, ge=0)  # Slurm's notice before the time limit (--signal); 0: none
    sbatch_args: list[str] = []  # passed through to sbatch

    @field_validator("partition", "account", "qos")
    @classmethod
    def _slurm_name(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a Slurm name (letters, digits and _ . -)")
        return value

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_TIME.fullmatch(value):
            raise ValueError(f"{value!r} is not a time limit: [days-]HH:MM:SS, e.g. 02:00:00")
        return value

    @property
    def tasks(self) -> int:
        return self.nodes * self.tasks_per_node


class Range(BaseModel):
    """Numbers between low and high (both included), spread evenly or on a log scale."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _not_empty(self) -> "Range":
        if not self.low < self.high:
            raise ValueError(f"the range is empty: low {self.low:g} is not below high {self.high:g}")
        if self.log and self.low <= 0:
            raise ValueError(f"a log range needs low above 0 (got {self.low:g})")
        return self


Choices = list[Any]
Entry = Union[Range, Choices]


class SweepParams(Section):
    """The `sweep:` section: how trials are picked, how many, how many at once, what is optimized, the space."""
    method: Literal["grid", "random", "tpe"] = "tpe"
    trials: int = Field(8, ge=1, le=1000)  # bounded: a deployment run's overrides may set it
    parallel: int = Field(2, ge=1, le=64)  # trials at once
    metric: str = "val_accuracy"  # an epoch metric the trials report
    direction: Literal["maximize", "minimize"] = "maximize"
    pruner: Literal["median", "none"] = "median"  # Optuna's median pruner stops a trial below its peers' median
    prune_after_trials: int = Field(2, ge=0)  # trials that finish before any is pruned
    prune_after_epochs: int = Field(1, ge=0)  # epochs of a trial before it may be pruned
    seed: int = 42
    space: dict[str, Entry] = {"train.learning_rate": Range(low=1e-4, high=1e-2, log=True),
                               "train.batch_size": [16, 32, 64]}


class ProjectParams(Section):
    """What makes a params.yaml ringflow's: the project format it is written in (tasks/project.py)."""
    format: int = Field(PROJECT_FORMAT, ge=1, le=PROJECT_FORMAT)


class Params(Section):
    project: ProjectParams = ProjectParams()
    data: DataParams = DataParams()
    input: InputParams = InputParams()
    train: TrainParams = TrainParams()
    slurm: SlurmParams = SlurmParams()
    tracking: TrackingParams = TrackingParams()
    registry: RegistryParams = RegistryParams()
    pipeline: PipelineParams = PipelineParams()
    sweep: SweepParams = SweepParams()
    serving: ServingParams = ServingParams()
    monitor: MonitorParams = MonitorParams()

    @model_validator(mode="after")
    def _np_from_the_allocation(self) -> "Params":
        """Under Slurm the job has nodes x tasks_per_node ranks, whatever train.np says."""
        if scheduler_spec(self.train.scheduler).allocates and self.train.np != self.slurm.tasks:
            object.__setattr__(self, "train", self.train.model_copy(update={"np": self.slurm.tasks}))
        return self

    def flat(self) -> dict[str, Any]:
        """Dotted keys to values, as logged to MLflow (`train.epochs` -> 20)."""
        return {f"{section}.{key}": value
                for section, values in self.model_dump().items() for key, value in values.items()}


def section_fields(section: str) -> dict[str, Any]:
    """The fields of a section of params.yaml, by name."""
    model = Params.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return dict(model.model_fields)


def _union_choices(section: str, name: str) -> str:
    """What a word-or-boolean field takes, in words: `'auto', true or false`."""
    annotation = section_fields(section)[name].annotation
    words = [repr(word) for word in literal_words(annotation)] + ["true", "false"]
    return ", ".join(words[:-1]) + f" or {words[-1]}"


def _word_field(section: str, name: str) -> bool:
    """Whether a field takes words (a Literal, alone or with a boolean)."""
    return section in Params.model_fields and bool(literal_words(section_fields(section)[name].annotation))


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = first["loc"]
    message = first["msg"].removeprefix("Value error, ")
    # a union's member (`literal['auto']`, `bool`) of a word-or-boolean field: the field's choices
    if len(loc) == 3 and isinstance(loc[2], str) and _word_field(str(loc[0]), str(loc[1])):
        loc, message = loc[:2], f"Input should be {_union_choices(str(loc[0]), str(loc[1]))}"
    where = ".".join(str(part) for part in loc)
    value = first.get("input")
    extra = "" if isinstance(value, dict) or repr(value) in message else f" (got {value!r})"
    return f"bad parameter {where}: {message}{extra}"


def _text_field(annotation: Any) -> bool:
    """Whether a field holds text only (optionally None): its values are taken as typed, never read as YAML."""
    return annotation in (str, str | None)


def _takes_mapping(annotation: Any) -> bool:
    """Whether a field holds a nested section (e.g. train.elastic), possibly optional, or a mapping (sweep.space)."""
    members = get_args(annotation) or (annotation,)
    return get_origin(annotation) is dict or \
        any(isinstance(member, type) and issubclass(member, BaseModel) for member in members)


def _parse_value(text: str, annotation: Any = Any) -> Any:
    """A command-line value as YAML reads it (`3`, `true`, `null`, `[1, 2]`, `{min_np: 1, max_np: 2}` for a nested
    section); any other mapping stays text, and so does any value of a text field (a run id of digits stays a
    string; `null` still means None)."""
    if _text_field(annotation):
        return None if text.strip() in ("null", "~") and annotation != str else text
    try:
        value = yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text
    return text if isinstance(value, dict) and not _takes_mapping(annotation) else value


def _full_key(key: str) -> tuple[str, str]:
    """`epochs` or `train.epochs` -> ('train', 'epochs'); unknown or ambiguous keys fail."""
    if "." in key:
        section, name = key.split(".", 1)
        if section in Params.model_fields and name in section_fields(section):
            return section, name
        raise ParamsError(f"bad parameter {key}: no such parameter")
    sections = [section for section in Params.model_fields if key in section_fields(section)]
    if len(sections) != 1:
        problem = "no such parameter" if not sections else "ambiguous, prefix a section"
        raise ParamsError(f"bad parameter {key}: {problem}")
    return sections[0], key


def mapping_entry(key: str) -> tuple[str, str, str] | None:
    """`train.model_args.units` -> ('train', 'model_args', 'units'): one entry of a parameter that is a mapping of
    free values (train.model_args); None for any other key."""
    parts = key.split(".", 2)
    if len(parts) != 3 or parts[0] not in Params.model_fields or parts[1] not in section_fields(parts[0]):
        return None
    return (parts[0], parts[1], parts[2]) if section_fields(parts[0])[parts[1]].annotation == dict[str, Any] \
        else None


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of the raw params with `{'train.epochs': 3}`-style overrides applied (and an entry of a
    mapping parameter: `{'train.model_args.units': 64}`)."""
    merged = {section: dict(values or {}) for section, values in raw.items()}
    for key, value in overrides.items():
        if entry := mapping_entry(key):
            section, name, inner = entry
            mapping = dict(merged.setdefault(section, {}).get(name) or {})
            mapping[inner] = _parse_value(value) if isinstance(value, str) else value
            merged[section][name] = mapping
            continue
        section, name = _full_key(key)
        annotation = section_fields(section)[name].annotation
        merged.setdefault(section, {})[name] = _parse_value(value, annotation) if isinstance(value, str) else value
    return merged


def with_overrides(params: Params, overrides: dict[str, Any]) -> Params:
    """The params with `{'train.epochs': 3}`-style overrides applied and validated again; ParamsError in one line."""
    try:
        return Params.model_validate(apply_overrides(params.model_dump(), overrides))
    except ValidationError as error:
        raise ParamsError(_one_line(error)) from None


def parse_assignments(assignments: list[str]) -> dict[str, str]:
    """`['train.epochs=3']` -> `{'train.epochs': '3'}`."""
    pairs = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"bad override {item!r}: expected KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def yaml_problem(path: Path, error: yaml.YAMLError) -> str:
    """One line for YAML that does not parse: the file, where, and what (not YAML's caret picture)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{path.name}{where}: {problem}"


def load_params(overrides: dict[str, Any] | None = None, path: Path = PARAMS_FILE) -> Params:
    """params.yaml with overrides, validated; raises ParamsError with one clear line."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except OSError as error:
        raise ParamsError(f"cannot read {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise ParamsError(yaml_problem(path, error)) from None
    try:
        return Params.model_validate(apply_overrides(raw, overrides or {}))
    except ValidationError as error:
        raise ParamsError(_one_line(error)) from None
