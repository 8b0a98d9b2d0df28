"""MLflow on the task side: the store (the embedded SQLite one under mlruns/, or a tracking server that holds the
artifacts too), run creation and closing."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from tasks.atomic import file_lock
from tasks.paths import MLRUNS_DIR
from tasks.tracking.credentials import foreign_artifacts
from tasks.tracking.uris import is_server, shown

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"  # MLflow's kind for model training (its kind selector shows it)

# MLflow prints a run's page as `<tracking URI>/#/...` when a run ends on a tracking server: with the URI's
# `user:password@` in it. ringflow says its runs' links itself (tracking.ui_url), without credentials.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per download in the run's log


SQLITE = "sqlite:///"


def embedded_uri(mlruns_dir: Path = MLRUNS_DIR) -> str:
    """The store of one person's checkout: sqlite:///<repo>/mlruns/mlflow.db."""
    return f"{SQLITE}{mlruns_dir / 'mlflow.db'}"


def tracking_uri(mlruns_dir: Path = MLRUNS_DIR) -> str:
    """The embedded store (MLFLOW_TRACKING_URI wins when set)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or embedded_uri(mlruns_dir)


def use_tracking_uri(uri: str | None) -> None:
    """A run's tracking.uri, when set, is the store of this process and of every process it starts (they read
    MLFLOW_TRACKING_URI); unset, the environment's or the embedded store stays."""
    if uri:
        os.environ["MLFLOW_TRACKING_URI"] = uri


def artifact_root(uri: str, experiment: str) -> str | None:
    """Where a new experiment of the store at `uri` keeps its artifacts: a tracking server's own place (None), or
    artifacts/<experiment> beside an SQLite store's file (MLflow's default, ./mlruns, is whatever folder the process
    runs in), or under this checkout's mlruns/ for another database."""
    if is_server(uri):
        return None
    folder = Path(uri.removeprefix(SQLITE)).parent if uri.startswith(SQLITE) else MLRUNS_DIR
    return (folder / "artifacts" / experiment).as_uri()


def client() -> Any:
    """An MlflowClient on ringflow's store. An SQLite store's client is made under a lock beside its file: making
    one makes a new file's tables, and two pipelines started at once in a new project would both make them."""
    from mlflow.tracking import MlflowClient
    MLRUNS_DIR.mkdir(parents=True, exist_ok=True)
    uri = tracking_uri()
    if not uri.startswith(SQLITE):
        return MlflowClient(tracking_uri=uri)
    database = Path(uri.removeprefix(SQLITE))
    with file_lock(database.with_name(f".{database.name}.lock")):
        return MlflowClient(tracking_uri=uri)


def experiment_id(name: str) -> str:
    """The experiment's id, created when new: its artifacts under mlruns/artifacts, or where a tracking server
    keeps them (it serves them over HTTP, so a host without this machine's disk writes them too); tagged with its
    kind, model training (MLflow 3.17's own UI goes by its browser's view instead: run_log.runs_link). One that
    keeps its artifacts on a server the environment's credentials are not for is refused in one line."""
    from tasks.params import ParamsError
    mlflow_client = client()
    found = mlflow_client.get_experiment_by_name(name)
    if found is not None:
        if problem := foreign_artifacts(f"experiment {name}", found.artifact_location):  # credentials go there
            raise ParamsError(problem)
        if found.tags.get(EXPERIMENT_KIND_TAG) is None:  # made before ringflow said its kind
            mlflow_client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING)
        return found.experiment_id
    return mlflow_client.create_experiment(name, artifact_location=artifact_root(tracking_uri(), name),
                                           tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING})


def start_run(experiment: str, params: dict[str, Any], tags: dict[str, str], name: str | None = None) -> str:
    """Create a run holding the resolved params and tags; returns its id."""
    mlflow_client = client()
    run = mlflow_client.create_run(experiment_id(experiment), tags=tags, run_name=name)
    from mlflow.entities import Param
    mlflow_client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    return run.info.run_id


def newest_runs(experiment: str, filter_string: str = "", max_results: int = 1) -> list[Any]:
    """Runs of the experiment matching the filter, newest first; none when the experiment does not exist yet."""
    mlflow_client = client()
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return list(mlflow_client.search_runs([found.experiment_id], filter_string, max_results=max_results,
                                          order_by=["attributes.start_time DESC"]))


def log_metrics(run_id: str, metrics: dict[str, float], step: int = 0, timestamp: int | None = None) -> None:
    """Log metrics to a run at one step (final ones at 0), in one batch; at `timestamp` (ms; now when None), which
    makes a batch sent again identical, so the store keeps it once."""
    import time

    from mlflow.entities import Metric
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    client().log_batch(run_id, metrics=[Metric(key, float(value), stamp, step) for key, value in metrics.items()])


DUPLICATE_ROW = ("IntegrityError", "UniqueViolation", "UNIQUE constraint", "duplicate key")  # SQLite's, PostgreSQL's


def log_dataset(run_id: str, dataset_input: Any) -> None:
    """A dataset input of the run. Two runs that log the same dataset at once (two pipelines, a sweep's trials) race
    on the store's insert of it, and the loser's insert breaks the unique key: logged again, it is found."""
    from mlflow.exceptions import MlflowException
    for attempt in (1, 2, 3):
        try:
            client().log_inputs(run_id, [dataset_input])
            return
        except MlflowException as error:
            if attempt == 3 or not any(said in str(error) for said in DUPLICATE_ROW):
                raise


def log_params(run_id: str, params: dict[str, Any]) -> None:
    """Log extra params (resolved values) to a run."""
    mlflow_client = client()
    for key, value in params.items():
        mlflow_client.log_param(run_id, key, str(value))


def log_artifacts(run_id: str, local_path: Path, artifact_path: str | None = None) -> None:
    """Copy a file or directory into the run's artifacts."""
    mlflow_client = client()
    if Path(local_path).is_dir():
        mlflow_client.log_artifacts(run_id, str(local_path), artifact_path)
    else:
        mlflow_client.log_artifact(run_id, str(local_path), artifact_path)


def artifact_location(run_id: str, path: str = "") -> str:
    """Where a run's artifacts (or one of them) are: a path on this machine, or the tracking server's URI
    (mlflow-artifacts:/...)."""
    from urllib.parse import unquote, urlparse
    root = client().get_run(run_id).info.artifact_uri
    location = f"{root}/{path}" if path else root
    return unquote(urlparse(location).path) if location.startswith("file:") else location


def reopen_run(run_id: str) -> None:
    """Mark a run RUNNING again (a retry or a resume continues it)."""
    client().update_run(run_id, status="RUNNING")


def set_tags(run_id: str, tags: dict[str, Any]) -> None:
    """Set several tags of a run."""
    mlflow_client = client()
    for key, value in tags.items():
        mlflow_client.set_tag(run_id, key, "" if value is None else str(value))


def end_run(run_id: str, ok: bool) -> None:
    """Mark the run FINISHED or FAILED."""
    client().set_terminated(run_id, status="FINISHED" if ok else "FAILED")


class TrackingServerAway(RuntimeError):
    """The tracking server did not answer through all of MLflow's client retries (tracking.retry_minutes)."""
    retryable = False  # the step's retry would wait as long again; --resume continues once the server is back


def server_away(error: BaseException) -> bool:
    """Whether MLflow's client gave up on a tracking server that did not answer (not one that answered no)."""
    said = str(error)
    return is_server(tracking_uri()) and "failed with exception" in said and \
        ("Max retries exceeded" in said or "Connection" in said)


@contextlib.contextmanager
def failing_marks_run(run_id: str) -> Iterator[None]:
    """Mark the run FAILED if the block raises, then re-raise; a tracking server that stopped answering cannot be
    told, and the run (left RUNNING, its checkpoints kept) ends in ringflow's one line instead of the client's."""
    try:
        yield
    except BaseException as error:
        if server_away(error):
            raise TrackingServerAway(
                f"the tracking server {shown(tracking_uri())} did not answer within tracking.retry_minutes: run "
                f"{run_id} stopped; its checkpoints are kept and --resume continues it once the server is back"
            ) from error
        end_run(run_id, ok=False)
        raise
