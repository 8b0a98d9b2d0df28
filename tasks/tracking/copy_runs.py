"""`python -m tasks copy-runs --to URI`: the history of one MLflow store (by default the embedded mlruns/mlflow.db)
into another (a team's server): every run with its params, dataset inputs, metric histories, tags, status, times
and artifacts, and every registered model version with its tags and aliases. A copy carries the id it was copied
from (COPIED_FROM), so running it again copies nothing twice; a run whose copy fails half-way is removed again.
The environment's MLflow credentials go to the end they were issued for only (tasks/tracking/server.py)."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tasks.params import ParamsError
from tasks.tracking.credentials import credentials_only_for_their_server, credentials_refusal, foreign_artifacts
from tasks.tracking.mlflow_store import artifact_root
from tasks.tracking.uris import shown

COPIED_FROM = "ringflow.copied_from"  # on a copied run: the source run's id; on a model version: name/version
COPYING_FROM = "ringflow.copying_from"  # on a copy being made (a copy killed half-way keeps it: removed next time)
PARENT_RUN = "mlflow.parentRunId"  # a sweep's trial names its sweep run: the copy names the copy
ENDED = ("FINISHED", "FAILED", "KILLED")
BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics, 100 params, 100 tags per call
MODEL_FOLDER = "registered-model"  # where a copied version's model lives among its copied run's artifacts


@dataclass
class CopyReport:
    runs: int = 0
    skipped_runs: int = 0
    versions: int = 0
    skipped_versions: int = 0
    run_ids: dict[str, str] = field(default_factory=dict)  # source run id -> its copy's
    not_ended: list[str] = field(default_factory=list)  # runs still going (or under one): left for a later copy

    def sentence(self) -> str:
        said = (f"copied {self.runs} runs and {self.versions} model versions "
                f"({self.skipped_runs} runs and {self.skipped_versions} versions were there already)")
        if self.not_ended:
            said += (f"; {len(self.not_ended)} runs not ended, left for a later copy: "
                     f"{', '.join(self.not_ended[:5])}{' ...' if len(self.not_ended) > 5 else ''}")
        return said


class StoreEnd:
    """An MlflowClient on one end of the copy: each of its calls sends the environment's MLflow credentials only if
    they were issued for this end's server."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient
        self.tracking_uri = uri
        self.client = MlflowClient(tracking_uri=uri, registry_uri=uri)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.client, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            with credentials_only_for_their_server(self.tracking_uri):
                return found(*args, **kwargs)
        return call


def check_location(end: StoreEnd, what: str, location: str) -> None:
    """Refuses artifacts of `end` kept on a server the credentials that go to `end` are not for."""
    with credentials_only_for_their_server(end.tracking_uri):
        problem = foreign_artifacts(what, location)
    if problem:
        raise ParamsError(f"{shown(end.tracking_uri)}: {problem}")


def pages(search: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Every result of a paged MLflow search."""
    token = None
    while True:
        page = search(*args, page_token=token, **kwargs)
        yield from page
        token = page.token
        if not token:
            return


def target_experiment(target: Any, experiment: Any) -> str:
    """The experiment of that name in the target store, made when missing (with its tags; its artifacts where the
    store keeps them); refused when it keeps them on a server the environment's credentials are not for."""
    found = target.get_experiment_by_name(experiment.name)
    if found is not None:
        check_location(target, f"experiment {experiment.name}", found.artifact_location)
        return found.experiment_id
    return target.create_experiment(experiment.name, tags=experiment.tags,
                                    artifact_location=artifact_root(target.tracking_uri, experiment.name))


def copy_metrics(source: Any, target: Any, run: Any, new_id: str) -> None:
    from mlflow.entities import Metric
    history = [Metric(m.key, m.value, m.timestamp, m.step) for key in run.data.metrics
               for m in source.get_metric_history(run.info.run_id, key)]
    for start in range(0, len(history), BATCH):
        target.log_batch(new_id, metrics=history[start:start + BATCH])


def copy_params(target: Any, run: Any, new_id: str) -> None:
    from mlflow.entities import Param
    params = [Param(key, value) for key, value in run.data.params.items()]
    for start in range(0, len(params), 100):
        target.log_batch(new_id, params=params[start:start + 100])


def copy_artifacts(source: Any, target: Any, run_id: str, new_id: str) -> None:
    if not source.list_artifacts(run_id):
        return
    with tempfile.TemporaryDirectory(prefix="copy-runs-") as folder:
        local = source.download_artifacts(run_id, "", folder)
        target.log_artifacts(new_id, local)


def copy_run(source: Any, target: Any, run: Any, experiment_id: str, parent_copies: dict[str, str]) -> str:
    """One ended run into the target experiment (its parent, if any, already copied: `parent_copies`); its copy's
    id. The COPIED_FROM tag comes last: a copy without it is not finished."""
    tags = {key: value for key, value in run.data.tags.items() if key not in (COPIED_FROM, COPYING_FROM)}
    if PARENT_RUN in tags:
        tags[PARENT_RUN] = parent_copies[tags[PARENT_RUN]]
    tags[COPYING_FROM] = run.info.run_id
    copy = target.create_run(experiment_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
    new_id = copy.info.run_id
    try:
        copy_params(target, run, new_id)
        if run.inputs and run.inputs.dataset_inputs:  # the run's dataset (the UI's Dataset column)
            target.log_inputs(new_id, run.inputs.dataset_inputs)
        copy_metrics(source, target, run, new_id)
        copy_artifacts(source, target, run.info.run_id, new_id)
        if run.info.end_time:
            target.set_terminated(new_id, status=run.info.status, end_time=run.info.end_time)
        target.set_tag(new_id, COPIED_FROM, run.info.run_id)
    except BaseException:
        target.delete_run(new_id)
        raise
    return new_id


def finished_copies(target: Any, experiment_id: str) -> dict[str, str]:
    """Source run id -> its finished copy in the target; copies a killed copy left half-made are deleted first."""
    for half_made in pages(target.search_runs, [experiment_id], f"tags.`{COPYING_FROM}` != ''"):
        if COPIED_FROM not in half_made.data.tags:
            target.delete_run(half_made.info.run_id)
    return {run.data.tags[COPIED_FROM]: run.info.run_id
            for run in pages(target.search_runs, [experiment_id], f"tags.`{COPIED_FROM}` != ''")}


def copy_experiment_runs(source: Any, target: Any, experiment: Any, report: CopyReport) -> None:
    """The experiment's ended runs not copied before, parents before their children (a run still going, or whose
    parent is, is left for a later copy)."""
    check_location(source, f"experiment {experiment.name}", experiment.artifact_location)
    experiment_id = target_experiment(target, experiment)
    copied = finished_copies(target, experiment_id)
    runs = list(pages(source.search_runs, [experiment.experiment_id], order_by=["attributes.start_time ASC"]))
    for run in sorted(runs, key=lambda found: PARENT_RUN in found.data.tags):  # parents first
        parent = run.data.tags.get(PARENT_RUN)
        if run.info.run_id in copied:
            report.skipped_runs += 1
            report.run_ids[run.info.run_id] = copied[run.info.run_id]
        elif run.info.status not in ENDED or (parent is not None and parent not in report.run_ids):
            report.not_ended.append(run.info.run_id)
        else:
            report.run_ids[run.info.run_id] = copy_run(source, target, run, experiment_id, report.run_ids)
            report.runs += 1


def copy_version(source: Any, target: Any, version: Any, run_ids: dict[str, str]) -> str:
    """One model version: its model files into its copied run's artifacts, a new version made from there."""
    import mlflow
    new_run = run_ids[version.run_id]
    stored = source.get_model_version_download_uri(version.name, version.version)
    check_location(source, f"model version {version.name}/{version.version}", stored)
    with tempfile.TemporaryDirectory(prefix="copy-runs-") as folder:
        with credentials_only_for_their_server(source.tracking_uri):
            local = mlflow.artifacts.download_artifacts(artifact_uri=stored, dst_path=folder,
                                                        tracking_uri=source.tracking_uri)
        path = f"{MODEL_FOLDER}/{version.name}-v{version.version}"
        target.log_artifacts(new_run, local, path)
    source_uri = f"runs:/{new_run}/{path}"
    tags = dict(version.tags) | {COPIED_FROM: f"{version.name}/{version.version}"}
    made = target.create_model_version(version.name, source_uri, run_id=new_run, tags=tags,
                                       description=version.description)
    return str(made.version)


def versions_by_model(client: Any) -> dict[str, list[Any]]:
    """Every model version of a registry by model name (no filter string: a name may hold any quote)."""
    found: dict[str, list[Any]] = {}
    for version in pages(client.search_model_versions):
        found.setdefault(version.name, []).append(version)
    return found


def copy_registered_models(source: Any, target: Any, report: CopyReport) -> None:
    from mlflow.exceptions import MlflowException
    source_versions, target_versions = versions_by_model(source), versions_by_model(target)
    for model in pages(source.search_registered_models):
        try:
            target.get_registered_model(model.name)
        except MlflowException:
            target.create_registered_model(model.name, tags=model.tags, description=model.description)
        there = {version.tags.get(COPIED_FROM): version.version for version in target_versions.get(model.name, [])}
        numbers: dict[str, str] = {}
        for version in sorted(source_versions.get(model.name, []), key=lambda found: int(found.version)):
            key = f"{model.name}/{version.version}"
            if key in there:
                report.skipped_versions += 1
                numbers[version.version] = there[key]
            elif version.run_id in report.run_ids:
                numbers[version.version] = copy_version(source, target, version, report.run_ids)
                report.versions += 1
        for alias, number in model.aliases.items():
            if number in numbers:
                target.set_registered_model_alias(model.name, alias, numbers[number])


def copy_runs(source_uri: str, target_uri: str, warn: Callable[[str], None] = print) -> CopyReport:
    """Every run and registered model version of one store into another, each once; a line for an end the
    environment's credentials are not sent to."""
    for uri in (source_uri, target_uri):
        if refusal := credentials_refusal(uri, os.environ):
            warn(f"warning: {shown(uri)}: {refusal}")
    source, target = StoreEnd(source_uri), StoreEnd(target_uri)
    report = CopyReport()
    for experiment in pages(source.search_experiments):
        copy_experiment_runs(source, target, experiment, report)
    copy_registered_models(source, target, report)
    return report
