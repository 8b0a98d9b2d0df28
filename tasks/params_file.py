"""params.yaml as ringflow writes it: every section and key with the models' defaults (tasks/params.py,
trainer/config.py) and a comment saying what it does. `ringflow init` writes it into a new project; the checkout's own
params.yaml is this text (a test keeps them equal)."""
from __future__ import annotations

import textwrap
from typing import Any

import yaml

from tasks.params import Params

HEADER = ("# ringflow's parameters: every run reads this file (ringflow wrote it from its defaults). Override one "
          "for a run with\n#   ringflow run --set train.epochs=5        (in ringflow's checkout: make run ARGS=\"--set "
          "train.epochs=5\")\n")
COMMENT_COLUMN, WIDTH = 27, 120
COMMENTS: dict[str, str] = {  # a section or a dotted key -> what it does (its default is the models')
    "project.format": "the project format this file is written in (a newer ringflow may write a higher one)",
    "data.dataset": ("digits (built-in: scikit-learn's 8x8 digits) | tfds:<name>[:<version>] | folder:<path> | "
                     "npz:<path> | table:<path> (CSV or Parquet: feature columns and target columns)"),
    "data.data_dir": "tfds download and cache folder",
    "data.download": "tfds may download; false: only what data_dir already holds",
    "data.val_fraction": "carved from train (by seed) when the source has no validation split",
    "data.test_fraction": "carved from train (by seed) when the source has no test split",
    "data.min_shards": "per split, so ranks can split by file",
    "data.shard_bytes": "target shard size (about 100 MB)",
    "data.workers": "conversion processes; 0: one per core",
    "data.max_image_side": ("image files: shorter side above it scaled down to it at conversion (about 1.15 x "
                            "input.image_size for photos: fewer pixels to decode every epoch); 0: as they are"),
    "data.bad_images": "images that cannot be decoded: fail (one line naming them) | skip (listed in the manifest)",
    "data.features": "table: the feature columns; null: every column but the target's",
    "data.target": "table: the target column (or a list of them); null: the last column",
    "input.image_size": "square size the model sees; null: the data's own size",
    "input.augment": "auto | on | off (auto: on for images of 64 px or more)",
    "input.augment_ops": "the distortions, when augmenting (digits, text: no flip)",
    "input.cache": "decoded training images in memory: auto (when they fit well) | true | false",
    "train.backend": ("horovod | horovod-tape | mirrored | mirrored-tape | multiworker | multiworker-tape | "
                      "central-storage | one-device | parameter-server"),
    "train.np": "Horovod ranks / tf.distribute workers / local replicas",
    "train.hosts": "e.g. \"h1:4,h2:4\" (localhost:<np> when null)",
    "train.hostfile": "horovodrun hostfile instead of hosts",
    "train.scheduler": "none: ranks on hosts/hostfile (or here) | slurm: a Slurm batch job (the slurm section)",
    "train.controller": "auto (MPI when Horovod has it and mpirun exists; elastic: Gloo) | gloo | mpi",
    "train.network_interface": ("the ranks' interface on every host (e.g. eth0); null: Horovod finds a routable one "
                                "(lo for a job on this machine alone: its ranks listen on 127.0.0.1 only)"),
    "train.shared_fs": "the hosts see this checkout's files: auto (asked of each host) | true | false",
    "train.horovodrun_args": "extra horovodrun arguments, passed through",
    "train.elastic": ("Horovod elastic (Gloo): {min_np: 1, max_np: 4} trains on between min_np and max_np ranks as "
                      "hosts come and go, np ranks at the start; also discovery_script (prints host:slots lines; "
                      "default: the hosts of hosts/hostfile that answer ssh) and cooldown_seconds ([10, 300]: how "
                      "long a host whose rank failed is left out before it may rejoin)"),
    "train.num_ps": "parameter-server: parameter servers",
    "train.model": ("cnn | small_cnn | resnet50 | alexnet_owt, or your own builder: \"models/net.py:build\" (a file of "
                    "the workspace) or \"package.module:build\" (docs/your-model.md)"),
    "train.model_args": "keyword arguments of the builder (e.g. {units: 64}); sweep them as train.model_args.units",
    "train.task": ("auto (the data's: class ids -> classification, real targets -> regression) | classification | "
                   "regression"),
    "train.loss": ("a Keras loss name (mse, huber, ...) or \"file.py:function\"; null: the task's (sparse categorical "
                   "crossentropy; mean squared error)"),
    "train.metrics": "Keras metric names reported each epoch and at evaluation, beside the task's own",
    "train.batch_size": "per replica; global batch = batch_size x replicas",
    "train.learning_rate": "for one replica; scaled by replicas when scale_lr is on",
    "train.warmup_epochs": "linear warmup to the scaled rate (large-batch convergence, Goyal et al.)",
    "train.precision": "fp32 | mixed_float16 | mixed_bfloat16",
    "train.jit_compile": "XLA (tf.distribute backends)",
    "train.steps_per_execution": "Keras fit backends: steps per compiled call (less Python per step)",
    "train.fp16_allreduce": "Horovod: fp16 gradient compression",
    "train.intra_op_threads": "CPU threads per process; 0: the host's cores shared by its ranks",
    "train.inter_op_threads": "TensorFlow's threads across independent ops, per process; 0: as intra_op_threads",
    "train.data_threads": "tf.data's private thread pool per process; 0: as intra_op_threads",
    "train.cycle_time_ms": "Horovod's cycle; 0: chosen (0.25 ms for ranks on one CPU host, else Horovod's 1 ms)",
    "train.fusion_threshold_mb": "Horovod's fusion buffer (0: no fusion); null: chosen to hold the model's gradient",
    "train.tensorboard": "rank 0 writes TensorBoard logs",
    "train.resume_from": "an MLflow run id: continue that run from its last checkpoint (make run ARGS=--resume)",
    "train.stall_timeout_seconds": ("a rank without progress this long ends the job (Horovod's stall shutdown); 0: "
                                    "never"),
    "train.timeout_minutes": "the whole training job's time limit; null: none",
    "train.scaling_np": "process counts of the scaling flow",
    "slurm": "with train.scheduler: slurm (np is then nodes x tasks_per_node; hosts must be unset)",
    "slurm.tasks_per_node": "ranks (or multiworker workers) per node; on GPU clusters, the GPUs used per node",
    "slurm.gpus_per_node": "0 on CPU clusters (no --gpus-per-node)",
    "slurm.partition": "null: the cluster's default partition",
    "slurm.time_limit": "[days-]HH:MM:SS; null: the partition's default",
    "slurm.pending_timeout_minutes": "queued longer than this: the job is cancelled and the step fails",
    "slurm.requeue": "node failure or preemption: Slurm requeues the job, which resumes from its checkpoint",
    "slurm.max_requeues": "requeues (notices, node failures) before the job is given up on",
    "slurm.notice_seconds": ("Slurm's notice before the time limit: the ranks stop after their checkpoint and the job"
                             " is requeued (or the step retried); 0: none"),
    "slurm.sbatch_args": "extra sbatch arguments, passed through",
    "tracking.ui_url": "`make ui`; the Prefect run summary links there",
    "tracking.uri": ("an MLflow server (http://host:5000, see docs/team.md); null: MLFLOW_TRACKING_URI if set, else "
                     "the embedded store mlruns/mlflow.db. Credentials: MLFLOW_TRACKING_USERNAME/PASSWORD"),
    "tracking.retry_minutes": "a tracking server that does not answer: metrics are kept and retried this long",
    "registry.model_name": "MLflow registered model",
    "registry.metric": "the test metric the gate compares; null: the task's (test_accuracy; test_mae)",
    "registry.mode": "max (higher is better) | min | auto (min for loss, error and mae/mse/rmse names)",
    "registry.min_delta": "what a new version must gain on `metric` over `champion` to take the alias",
    "pipeline.train_retries": "Prefect retries a failed training (not bad input or out of memory); same run, resumed",
    "sweep": "ringflow sweep (make sweep): trials of the training step over `space`",
    "sweep.method": "grid | random | tpe (Optuna's TPE)",
    "sweep.parallel": "trials at once, on the slots of train.hosts (or this machine's cores), or Slurm jobs",
    "sweep.metric": "an epoch metric: what the pruner watches and the best trial is picked by",
    "sweep.pruner": "median (Optuna's: a trial below the others' median at the same epoch stops) | none",
    "sweep.prune_after_trials": "trials that finish before any is pruned",
    "sweep.prune_after_epochs": "epochs of a trial before it may be pruned",
    "sweep.space": "a parameter by its dotted name: a list of choices, or {low, high, log} for numbers",
    "serving": "make serve-model: the registry's champion over HTTP (TensorFlow Serving's REST, MLflow's)",
    "serving.host": "0.0.0.0: every interface",
    "serving.max_batch_size": "images the model is given at once, gathered from concurrent requests",
    "serving.max_wait_ms": "how long a batch waits for more images once it has one",
    "serving.max_instances": "images in one request; more: the request is refused (413)",
    "serving.max_request_bytes": "a request's body (32 MiB); larger: refused (413) before it is read",
    "serving.poll_seconds": "how often the registry is asked for the champion; a new one is loaded, then swapped in",
    "serving.challenger": "true: the alias challenger's version too, at /v1/models/NAME/labels/challenger",
    "serving.max_image_pixels": ("width x height an image may declare (2048x2048); more: that image's error, before "
                                 "it is decoded. At most this default: the SavedModel's own signature refuses over it"),
    "serving.max_connections": "open connections and requests at once; more: 503 until some end",
    "serving.read_timeout_seconds": "a client's time to send a request's headers, then its body; slower: closed (408)",
    "serving.keep_alive_seconds": "an idle connection between requests is closed after this",
    "serving.max_queued_requests": ("requests waiting for the model; more: 429, as TensorFlow Serving's "
                                    "RESOURCE_EXHAUSTED"),
    "serving.log_fraction": "share of the served images (instances) logged with their answers; 0: none",
    "serving.log_max_per_second": "items logged per second at most; past it, a sample of them (never a request's wait)",
    "serving.log_dir": "the hourly Parquet files of logged predictions; null: outputs/predictions",
    "monitor": "the monitor deployment: the last window's served items against the training's reference",
    "monitor.window_minutes": "the served items of this many minutes before the monitor's run are compared",
    "monitor.min_items": "fewer items of the served version in the window: no verdict",
    "monitor.threshold": "share of drifting columns (brightness mean and spread, score: Evidently's tests) = drift",
    "monitor.answer_threshold": "Jensen-Shannon distance between the answers' distributions that is drift",
    "monitor.retrain": "the deployment a drift starts, once per window; null: report only",
}


def flow(value: Any) -> str:
    """A value as YAML writes it on one line."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False).strip().removesuffix("...") \
        .strip()


def commented(line: str, comment: str | None) -> list[str]:
    """The line with its comment from COMMENT_COLUMN, wrapped at WIDTH; above it, at its indent, when the line
    reaches that column."""
    if not comment:
        return [line]
    if len(line) >= COMMENT_COLUMN - 1:
        indent = " " * (len(line) - len(line.lstrip()))
        return [*textwrap.wrap(comment, WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ",
                               break_on_hyphens=False), line]
    lines = textwrap.wrap(comment, WIDTH - COMMENT_COLUMN - 2, break_on_hyphens=False)
    return [f"{line:<{COMMENT_COLUMN}}# {lines[0]}", *(f"{'':<{COMMENT_COLUMN}}# {more}" for more in lines[1:])]


def entry_lines(section: str, key: str, value: Any) -> list[str]:
    """One key of a section; a mapping of mappings or lists (sweep.space) as a block of flow values."""
    comment = COMMENTS.get(f"{section}.{key}")
    if isinstance(value, dict) and value and all(isinstance(item, (dict, list)) for item in value.values()):
        return [*commented(f"  {key}:", comment), *(f"    {name}: {flow(item)}" for name, item in value.items())]
    return commented(f"  {key}: {flow(value)}", comment)


def render_params(document: dict[str, dict[str, Any]] | None = None, header: str = HEADER) -> str:
    """params.yaml's text: the header, then each section's keys with their values (the defaults, unless a document
    of params.yaml's shape gives them) and comments."""
    lines = header.splitlines()
    for section, values in (document or Params().model_dump(mode="json")).items():
        lines += commented(f"{section}:", COMMENTS.get(section))
        for key, value in values.items():
            lines += entry_lines(section, key, value)
    return "\n".join(lines) + "\n"
