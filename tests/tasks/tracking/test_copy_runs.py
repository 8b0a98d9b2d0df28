"""copy-runs between two real MLflow stores: runs with params, metric histories, tags, status and artifacts, the
registered versions with their tags and aliases, the runs' datasets; a second copy copies nothing twice."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.params import load_params
from tasks.tracking.copy_runs import COPIED_FROM, copy_runs
from tasks.tracking.run_labels import dataset_input
from tests.tasks.tracking.test_run_labels import MANIFEST
from tests.tasks.tracking.test_server import (
    BASIC,
    EXPERIMENT,
    MLFLOW_ANSWERS,
    Seen,
    authorizations,
    mlflow_like,
    mlflow_server,
    serving,
)


def filled_store(folder: Path) -> str:
    """A store like a user's: two finished runs of `ringflow`, each with a model version; v2 is champion."""
    from mlflow.tracking import MlflowClient
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("ringflow", artifact_location=(folder / "artifacts").as_uri())
    client.create_registered_model("ringflow")
    for number in (1, 2):
        run_id = client.create_run(experiment, tags={"ringflow.data_hash": f"h{number}"}, run_name=f"run-{number}")\
            .info.run_id
        client.log_param(run_id, "learning_rate", str(0.001 * number))
        client.log_inputs(run_id, [dataset_input(load_params({}), f"h{number}", "data/prepared", MANIFEST)])
        for step in range(3):
            client.log_metric(run_id, "loss", 1.0 / (step + number), step=step)
        model = folder / f"model-{number}"
        model.mkdir()
        (model / "MLmodel").write_text(f"model {number}\n")
        client.log_artifacts(run_id, str(model), "model")
        client.set_terminated(run_id, "FINISHED")
        version = client.create_model_version("ringflow", f"runs:/{run_id}/model", run_id=run_id,
                                              tags={"test_accuracy": f"0.9{number}"})
    client.set_registered_model_alias("ringflow", "champion", version.version)
    return uri


def test_a_store_is_copied_once_with_its_history_and_registry(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    (tmp_path / "source").mkdir()
    (tmp_path / "target").mkdir()
    source = filled_store(tmp_path / "source")
    target = f"sqlite:///{tmp_path / 'target' / 'mlflow.db'}"
    first = copy_runs(source, target)
    assert (first.runs, first.versions, first.skipped_runs) == (2, 2, 0)
    copied_models = sorted((tmp_path / "target" / "artifacts" / "ringflow").glob("*/artifacts/model/MLmodel"))
    assert [path.read_text() for path in copied_models] in (["model 1\n", "model 2\n"], ["model 2\n", "model 1\n"])
    again = copy_runs(source, target)
    assert (again.runs, again.versions, again.skipped_runs, again.skipped_versions) == (0, 0, 2, 2)
    assert again.sentence() == "copied 0 runs and 0 model versions (2 runs and 2 versions were there already)"
    client = MlflowClient(tracking_uri=target, registry_uri=target)
    experiment = client.get_experiment_by_name("ringflow")
    copies = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    assert set(copies) == {"run-1", "run-2"}
    copy = copies["run-2"]
    assert copy.info.status == "FINISHED" and copy.data.params == {"learning_rate": "0.002"}
    assert copy.data.tags["ringflow.data_hash"] == "h2"
    assert copy.data.tags[COPIED_FROM] == source_run_id(source, "run-2")
    assert [(given.dataset.name, given.dataset.digest) for given in copy.inputs.dataset_inputs] == [("digits", "h2")]
    assert [(m.step, m.value) for m in client.get_metric_history(copy.info.run_id, "loss")] == \
        [(0, 0.5), (1, 1 / 3), (2, 0.25)]
    local = client.download_artifacts(copy.info.run_id, "model/MLmodel", str(tmp_path / "check"))
    assert Path(local).read_text() == "model 2\n"
    champion = client.get_model_version_by_alias("ringflow", "champion")
    assert (champion.run_id, champion.tags["test_accuracy"]) == (copy.info.run_id, "0.92")
    assert champion.tags[COPIED_FROM] == "ringflow/2"


def source_run_id(source: str, name: str) -> str:
    """The id of a run of the source store, by name."""
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=source)
    experiment = client.get_experiment_by_name("ringflow")
    (found,) = client.search_runs([experiment.experiment_id], f"attributes.run_name = '{name}'")
    return found.info.run_id


def test_copy_runs_needs_a_target_and_a_store_that_exists(tmp_path: Path) -> None:
    from tasks import steps
    from tasks.params import ParamsError
    with pytest.raises(ParamsError, match="^copy-runs needs --to"):
        steps.copy_runs_step(None, None)
    with pytest.raises(ParamsError, match=f"^no MLflow store at {tmp_path / 'none.db'}$"):
        steps.copy_runs_step(None, f"sqlite:///{tmp_path / 'none.db'}")


def test_only_ended_runs_are_copied_parents_mapped_half_made_copies_replaced(tmp_path: Path) -> None:
    """A run still RUNNING is left for a later copy (and said); a sweep's trial points at its sweep run's copy; a
    copy killed half-way (its run made, not finished) is replaced, not duplicated; a model name with a quote."""
    from mlflow.tracking import MlflowClient

    from tasks.tracking.copy_runs import COPYING_FROM, PARENT_RUN
    source_uri, target_uri = (f"sqlite:///{tmp_path / name}.db" for name in ("source", "target"))
    source = MlflowClient(tracking_uri=source_uri, registry_uri=source_uri)
    experiment = source.create_experiment("ringflow", artifact_location=(tmp_path / "artifacts").as_uri())
    sweep = source.create_run(experiment, run_name="sweep").info.run_id
    trial = source.create_run(experiment, run_name="trial-0", tags={PARENT_RUN: sweep}).info.run_id
    going = source.create_run(experiment, run_name="going").info.run_id
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "MLmodel").write_text("model\n")
    source.log_artifacts(trial, str(tmp_path / "model"), "model")
    for run_id in (sweep, trial):
        source.set_terminated(run_id, "FINISHED")
    source.create_registered_model("it's-a-model")
    source.create_model_version("it's-a-model", f"runs:/{trial}/model", run_id=trial)
    target = MlflowClient(tracking_uri=target_uri, registry_uri=target_uri)
    target_experiment = target.create_experiment("ringflow",  # not MLflow's default: ./mlruns of the checkout
                                                 artifact_location=(tmp_path / "target-artifacts").as_uri())
    killed = target.create_run(target_experiment, run_name="trial-0",
                               tags={COPYING_FROM: trial}).info.run_id  # what a copy killed half-way leaves

    first = copy_runs(source_uri, target_uri)
    assert (first.runs, first.versions, first.not_ended) == (2, 1, [going])
    assert first.sentence().endswith(f"; 1 runs not ended, left for a later copy: {going}")
    copies = {run.info.run_name: run for run in target.search_runs([target.get_experiment_by_name("ringflow")
                                                                    .experiment_id])}
    assert set(copies) == {"sweep", "trial-0"} and copies["trial-0"].info.run_id != killed
    assert copies["trial-0"].data.tags[PARENT_RUN] == copies["sweep"].info.run_id  # the copy's parent, not the source's
    assert target.get_run(killed).info.lifecycle_stage == "deleted"
    assert target.get_latest_versions("it's-a-model")[0].run_id == copies["trial-0"].info.run_id

    source.set_terminated(going, "FAILED")
    again = copy_runs(source_uri, target_uri)
    assert (again.runs, again.skipped_runs, again.not_ended, again.skipped_versions) == (1, 2, [], 1)


def test_copy_runs_sends_the_credentials_to_the_end_they_were_issued_for_only(
        credentials: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """copy-runs between two servers (each holding one experiment, the MLflow client real): the check of both ends
    and the copy itself send the environment's credentials to the server RINGFLOW_CREDENTIALS_FOR names, never to the
    other end (one line says so); issued for the source, they go to the source only. The environment keeps them."""
    from tasks import steps
    source_seen: Seen = []
    target_seen: Seen = []
    source_server, target_server = mlflow_server(source_seen), mlflow_server(target_seen)
    source, target = next(source_server), next(target_server)
    try:
        for issued_for, other in ((target, source), (source, target)):
            source_seen.clear()
            target_seen.clear()
            credentials.setenv("RINGFLOW_CREDENTIALS_FOR", issued_for)
            assert steps.copy_runs_step(source, target).startswith("copied 0 runs and 0 model versions")
            seen = {source: source_seen, target: target_seen}
            assert authorizations(seen[issued_for]) == {BASIC} and authorizations(seen[other]) == {None}
            assert any("runs/search" in path for _, path, _ in seen[other])  # the copy asked it, not only the check
            warned = (f"warning: {other}: this environment's MLflow credentials (MLFLOW_TRACKING_USERNAME, "
                      f"MLFLOW_TRACKING_PASSWORD) are for {issued_for}, not sent to another server\n")
            assert warned in capsys.readouterr().out
            assert os.environ["MLFLOW_TRACKING_PASSWORD"] == "hunter2"
    finally:
        source_server.close()
        target_server.close()


def test_copy_runs_refuses_artifacts_kept_on_a_server_the_credentials_are_not_for(
        credentials: pytest.MonkeyPatch) -> None:
    """The source (the credentials' server) keeps an experiment's artifacts on another server: copy-runs stops in
    one line before it reads any of them there, with the credentials or without."""
    from tasks import steps
    from tasks.params import ParamsError
    elsewhere_seen: Seen = []
    elsewhere_server = mlflow_server(elsewhere_seen)
    elsewhere = next(elsewhere_server)
    planted = {"experiments": [EXPERIMENT | {"artifact_location": f"{elsewhere}/artifacts"}]}
    answers = MLFLOW_ANSWERS | {"experiments/search": planted}
    source_server = serving(lambda method, path: mlflow_like(method, path, answers), lambda *request: None)
    target_server = mlflow_server([])
    source, target = next(source_server), next(target_server)
    try:
        credentials.setenv("RINGFLOW_CREDENTIALS_FOR", source)
        with pytest.raises(ParamsError) as refused:
            steps.copy_runs_step(source, target)
        assert str(refused.value) == (f"{source}: experiment ringflow keeps its artifacts at {elsewhere}/artifacts: "
                                      "this environment's MLflow credentials (MLFLOW_TRACKING_USERNAME, "
                                      f"MLFLOW_TRACKING_PASSWORD) are for {source}, not sent to another server")
        assert elsewhere_seen == []
    finally:
        for server in (source_server, target_server, elsewhere_server):
            server.close()
