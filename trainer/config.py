"""The trainer's part of ringflow's configuration: the `train` and `input` parameter models (the only place their
defaults live), and the file a launch writes for its processes (`python -m trainer --config FILE`).

The launcher resolves params.yaml and overrides into these models, adds what it decided for this run (`job`), and
writes all of it to one JSON file that every process of the job reads.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from trainer.backend_specs import BACKEND_NAMES
from trainer.choices import ControllerChoice, SchedulerChoice, scheduler_spec
from trainer.models import MODEL_CATALOG

CONFIG_FILE_NAME = "trainer_config.json"  # beside the model it trained: the job's resolved configuration
Backend = Literal[BACKEND_NAMES]  # type: ignore[valid-type]
Precision = Literal["fp32", "mixed_float16", "mixed_bfloat16"]
AugmentOp = Literal["crop", "flip", "brightness", "contrast"]
Task = Literal["auto", "classification", "regression"]
# the user's own function: a file of the workspace ("models/net.py:build") or an importable module ("nets.cnn:build")
IMPORT_PATH = re.compile(r"(?:[\w.\-/]+\.py|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*):[A-Za-z_]\w*")
LOSS_NAME = re.compile(r"[A-Za-z_]\w*")


YAML11_BOOLEAN_WORDS = {True: ("on", "yes", "true"), False: ("off", "no", "false")}


def literal_words(annotation: Any) -> tuple[Any, ...]:
    """The values a Literal (or an optional Literal) annotation allows; () for anything else."""
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    if get_origin(annotation) in (Union, UnionType):
        return tuple(word for part in get_args(annotation) for word in literal_words(part))
    return ()


class Section(BaseModel):
    """A section of params.yaml: unknown keys are errors, values are frozen once validated."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _enum_word_read_as_boolean(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML 1.1 (params.yaml, --set values) reads `off`, `on`, `yes`, `no` as booleans: an enum that has such a
        word gets it back."""
        if not isinstance(value, bool):
            return value
        words = literal_words(cls.model_fields[info.field_name].annotation) if info.field_name else ()
        return next((word for word in YAML11_BOOLEAN_WORDS[value] if word in words), value)

    @field_validator("*", mode="after")
    @classmethod
    def _no_control_character(cls, value: Any) -> Any:
        """No value holds a line break or another control character: values reach batch scripts, their comments
        and command lines, where a newline would start a command of its own."""
        if (found := control_character(value)) is not None:
            raise ValueError(f"holds a control character ({found!r}), which no value may (it reaches scripts and "
                             "command lines)")
        return value


CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


def control_character(value: Any) -> str | None:
    """The first control character in a value's text (nested lists and mappings too), else None."""
    if isinstance(value, str):
        match = CONTROL_CHARACTER.search(value)
        return match.group() if match else None
    if isinstance(value, (list, tuple)):
        return next((found for item in value if (found := control_character(item)) is not None), None)
    if isinstance(value, dict):
        return control_character([*value.keys(), *value.values()])
    return None  # a number, a flag, or a nested section (which checks its own fields)


class InputParams(Section):
    """The trainer's input pipeline."""
    image_size: int | None = Field(None, ge=8)  # square size the model sees; None: the data's own size
    augment: Literal["auto", "on", "off"] = "auto"  # auto: on for images of 64 px or more
    augment_ops: list[AugmentOp] = ["crop", "flip", "brightness", "contrast"]  # digits or text: leave out flip
    cache: Literal["auto"] | bool = "auto"  # decoded training images in memory; auto: when they fit well


class ElasticParams(Section):
    """Horovod's elastic mode: ranks come and go with the hosts, training goes on between min_np and max_np."""
    min_np: int = Field(1, ge=1)  # fewer ranks than this: wait for hosts (horovodrun --elastic-timeout), then fail
    max_np: int = Field(..., ge=1)  # never more ranks than this, however many hosts are found
    discovery_script: str | None = None  # prints `host:slots` lines; None: the hosts of train.hosts / hostfile
    # that answer ssh
    cooldown_seconds: tuple[int, int] = (10, 300)  # a host whose rank failed is left out this long, then retried

    @model_validator(mode="after")
    def _ordered(self) -> "ElasticParams":
        if self.min_np > self.max_np:
            raise ValueError(f"min_np {self.min_np} exceeds max_np {self.max_np}")
        low, high = self.cooldown_seconds
        if not 1 <= low <= high <= 3600:
            raise ValueError("cooldown_seconds needs 1 <= low <= high <= 3600 (Horovod's limits)")
        return self


INTERFACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}")  # Linux's: at most 15 bytes, no / or space


class TrainParams(Section):
    """How the model is trained and distributed."""
    backend: Backend = "horovod"
    np: int = Field(2, ge=1)  # Horovod ranks, multiworker / parameter-server workers, or local replicas
    hosts: str | None = None  # "h1:4,h2:4" (horovod: slots; multiworker: one worker per listed slot)
    hostfile: str | None = None  # horovodrun hostfile ("host slots=N" lines)
    scheduler: SchedulerChoice = "none"  # slurm: the job is a Slurm batch job (the `slurm` section)
    controller: ControllerChoice = "auto"  # auto: MPI if built and mpirun exists (not elastic), else Gloo
    shared_fs: Literal["auto"] | bool = "auto"  # the hosts see this checkout's files; auto: asked of each host
    # the ranks' network interface (e.g. eth0); null: Horovod finds a routable one (lo on this machine alone)
    network_interface: str | None = None
    horovodrun_args: list[str] = []  # passed through to horovodrun
    elastic: ElasticParams | None = None  # {min_np, max_np}: Horovod's elastic mode (Gloo); np is the start size
    num_ps: int = Field(1, ge=1)  # parameter-server: parameter servers
    model: str = "cnn"  # a catalog name, or the user's builder: "models/net.py:build" or "package.module:build"
    model_args: dict[str, Any] = {}  # keyword arguments of the model's builder (each may be swept)
    task: Task = "auto"  # auto: the prepared data's (class ids: classification, real targets: regression)
    loss: str | None = None  # a Keras loss name or "file.py:function"; None: the task's (crossentropy, MSE)
    metrics: list[str] = []  # Keras metric names reported each epoch and at evaluation, beside the task's own
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(32, ge=1)  # per replica
    learning_rate: float = Field(0.001, gt=0)  # for one replica
    scale_lr: bool = True  # linear rule: x replicas
    warmup_epochs: float = Field(2.0, ge=0)
    precision: Precision = "fp32"
    jit_compile: bool = False
    steps_per_execution: int = Field(4, ge=1)  # Keras fit backends: training steps per compiled call
    fp16_allreduce: bool = False  # Horovod: compress gradients to fp16 for the allreduce
    intra_op_threads: int = Field(0, ge=0)  # CPU threads per process; 0: the host's cores shared by its ranks
    inter_op_threads: int = Field(0, ge=0)  # TensorFlow's threads across independent ops; 0: as intra_op
    data_threads: int = Field(0, ge=0)  # tf.data's private thread pool per process; 0: as intra_op
    cycle_time_ms: float = Field(0, ge=0)  # Horovod's cycle; 0: chosen (trainer/tuning.py)
    fusion_threshold_mb: int | None = Field(None, ge=0)  # Horovod's fusion buffer (0: none); None: chosen
    tensorboard: bool = True  # rank 0 writes TensorBoard logs
    seed: int = 42
    keep_checkpoints: int = Field(3, ge=1)
    resume_from: str | None = None  # an MLflow run id: continue that run from its last checkpoint
    stall_timeout_seconds: int = Field(60, ge=0)  # a rank without progress this long ends the job; 0: never
    timeout_minutes: float | None = Field(None, gt=0)  # the whole job's limit; None: none
    scaling_np: list[int] = [1, 2]  # the scaling flow's process counts

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODEL_CATALOG and not IMPORT_PATH.fullmatch(value):
            raise ValueError(f"unknown model {value!r}: a catalog name ({', '.join(sorted(MODEL_CATALOG))}) or "
                             "the builder of your own, as \"path/to/file.py:function\" or \"package.module:function\"")
        return value

    @field_validator("loss")
    @classmethod
    def _loss_name(cls, value: str | None) -> str | None:
        if value is not None and not (LOSS_NAME.fullmatch(value) or IMPORT_PATH.fullmatch(value)):
            raise ValueError(f"{value!r} is neither a Keras loss name nor \"path/to/file.py:function\"")
        return value

    @model_validator(mode="after")
    def _np_within_elastic_range(self) -> "TrainParams":
        if self.elastic and not self.elastic.min_np <= self.np <= self.elastic.max_np:
            raise ValueError(f"np {self.np} (the start size) is outside elastic min_np {self.elastic.min_np} .. "
                             f"max_np {self.elastic.max_np}")
        return self

    @model_validator(mode="after")
    def _hosts_from_one_place(self) -> "TrainParams":
        if scheduler_spec(self.scheduler).allocates and (self.hosts or self.hostfile):
            given = "hosts" if self.hosts else "hostfile"
            raise ValueError(f"{given} is set but scheduler {self.scheduler} takes its hosts from the allocation: "
                             f"leave train.{given} unset (slurm.nodes and slurm.tasks_per_node say how many)")
        return self

    @field_validator("network_interface")
    @classmethod
    def _interface_name(cls, value: str | None) -> str | None:
        """A Linux interface name and nothing else: it reaches mpirun's shell command line."""
        if value is not None and not INTERFACE_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a network interface name (letters, digits and _ . : @ -, at most 15)")
        return value

    @field_validator("scaling_np")
    @classmethod
    def _positive_counts(cls, value: list[int]) -> list[int]:
        if not value or min(value) < 1:
            raise ValueError("scaling_np needs one or more counts >= 1")
        return value


class JobSpec(Section):
    """What the launcher decided for one training job."""
    data_dir: Path  # the prepared shards and manifest
    out_dir: Path  # where the lead process saves the model and the training summary
    checkpoint_dir: Path  # every process restores from here; the lead saves here
    checkpoint_owner: str  # the config and code version the checkpoints belong to; others are refused
    augment: bool  # input.augment resolved against the data
    data_fingerprint: str  # the manifest's fingerprint of the data trained on (evaluation checks it is the same)
    metrics_retry_seconds: float  # how long epoch metrics wait for a tracking server that does not answer
    model_outputs: bool = True  # the lead writes test predictions and the SavedModel (trials and scaling runs: no)
    # the job's copies of the user's code files train.model and train.loss name ("file.py:function"), beside the
    # model (they travel with the job's files to every host); None: a catalog model, a Keras loss, or a package
    model_source: Path | None = None
    loss_source: Path | None = None
    # Horovod's cycle and fusion buffer the job chose (trainer/tuning.py), set before Horovod starts; None: Horovod's
    # own, or the user's (train.horovodrun_args, the environment)
    cycle_time_ms: float | None = None
    fusion_threshold_mb: int | None = None


class TrainerConfig(BaseModel):
    """What every process of a job reads: the resolved `train` and `input` sections and the job.

    The file may hold the run's other sections too (data, tracking, ...); processes ignore them.
    """
    model_config = ConfigDict(extra="ignore", frozen=True)
    train: TrainParams
    input: InputParams
    job: JobSpec


def write_config(sections: dict[str, Any], job: JobSpec, path: Path) -> Path:
    """The resolved sections plus the job, as JSON (exact types: no YAML 1.1 guessing on the way back)."""
    document = dict(sections, job=job.model_dump(mode="json"))
    TrainerConfig.model_validate(document)  # a file the processes cannot read is never written
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str))
    tmp.replace(path)
    return path


def read_config(path: Path) -> TrainerConfig:
    """The job's configuration file as the processes see it."""
    return TrainerConfig.model_validate(json.loads(Path(path).read_text()))
