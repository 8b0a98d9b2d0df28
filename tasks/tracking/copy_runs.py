"""`python -m tasks copy-runs --to URI`: the history of one MLflow store (by default the embedded mlruns/mlflow.db)
into another (a team's server): every run with its params, dataset inputs, metric histories, tags, status, times
and artifacts, and every registered model version with its tags and aliases. A copy carries the id it was copied
from (COPIED_FROM), so running it again copies nothing twice; a run whose copy fails half-way is removed again."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator

COPIED_FROM = "ringflow.copied_from"  # on a copied run: the source run's id; on a model version: name/version
BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics, 100 params, 100 tags per call
MODEL_FOLDER = "registered-model"  # where a copied version's model lives among its copied run's artifacts


@dataclass
class CopyReport:
    runs: int = 0
    skipped_runs: int = 0
    versions: int = 0
    skipped_versions: int = 0
    run_ids: dict[str, str] = field(default_factory=dict)  # source run id -> its copy's

    def sentence(self) -> str:
        return (f"copied {self.runs} runs and {self.versions} model versions "
                f"({self.skipped_runs} runs and {self.skipped_versions} versions were there already)")


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
    store keeps them)."""
    found = target.get_experiment_by_name(experiment.name)
    return found.experiment_id if found is not None else target.create_experiment(experiment.name,
                                                                                   tags=experiment.tags)


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


def copy_run(source: Any, target: Any, run: Any, experiment_id: str) -> str:
    """One run into the target experiment; its copy's id. The COPIED_FROM tag comes last: a copy without it is
    not finished."""
    tags = {key: value for key, value in run.data.tags.items() if key != COPIED_FROM}
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


def copy_experiment_runs(source: Any, target: Any, experiment: Any, report: CopyReport) -> None:
    experiment_id = target_experiment(target, experiment)
    copied = {run.data.tags[COPIED_FROM]: run.info.run_id
              for run in pages(target.search_runs, [experiment_id], f"tags.`{COPIED_FROM}` != ''")}
    for run in pages(source.search_runs, [experiment.experiment_id], order_by=["attributes.start_time ASC"]):
        if run.info.run_id in copied:
            report.skipped_runs += 1
            report.run_ids[run.info.run_id] = copied[run.info.run_id]
            continue
        report.run_ids[run.info.run_id] = copy_run(source, target, run, experiment_id)
        report.runs += 1


def copy_version(source: Any, target: Any, version: Any, run_ids: dict[str, str]) -> str:
    """One model version: its model files into its copied run's artifacts, a new version made from there."""
    import mlflow
    new_run = run_ids[version.run_id]
    stored = source.get_model_version_download_uri(version.name, version.version)
    with tempfile.TemporaryDirectory(prefix="copy-runs-") as folder:
        local = mlflow.artifacts.download_artifacts(artifact_uri=stored, dst_path=folder,
                                                    tracking_uri=source.tracking_uri)
        path = f"{MODEL_FOLDER}/{version.name}-v{version.version}"
        target.log_artifacts(new_run, local, path)
    source_uri = f"runs:/{new_run}/{path}"
    tags = dict(version.tags) | {COPIED_FROM: f"{version.name}/{version.version}"}
    made = target.create_model_version(version.name, source_uri, run_id=new_run, tags=tags,
                                       description=version.description)
    return str(made.version)


def copy_registered_models(source: Any, target: Any, report: CopyReport) -> None:
    from mlflow.exceptions import MlflowException
    for model in pages(source.search_registered_models):
        try:
            target.get_registered_model(model.name)
        except MlflowException:
            target.create_registered_model(model.name, tags=model.tags, description=model.description)
        there = {version.tags.get(COPIED_FROM): version.version
                 for version in pages(target.search_model_versions, f"name = '{model.name}'")}
        numbers: dict[str, str] = {}
        for version in sorted(pages(source.search_model_versions, f"name = '{model.name}'"),
                              key=lambda found: int(found.version)):
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


def copy_runs(source_uri: str, target_uri: str) -> CopyReport:
    """Every run and registered model version of one store into another, each once."""
    from mlflow.tracking import MlflowClient
    source = MlflowClient(tracking_uri=source_uri, registry_uri=source_uri)
    target = MlflowClient(tracking_uri=target_uri, registry_uri=target_uri)
    report = CopyReport()
    for experiment in pages(source.search_experiments):
        copy_experiment_runs(source, target, experiment, report)
    copy_registered_models(source, target, report)
    return report
