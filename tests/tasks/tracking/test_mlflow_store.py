"""ringflow's MLflow store: its URI, runs with params and tags, newest first, metrics in one batch, artifacts, and a
run marked FAILED when the block working on it raises."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.tracking import mlflow_store
from tests.helpers import free_port


@pytest.fixture
def experiment(shared_store: str, tmp_path: Path) -> str:
    name = f"store-{tmp_path.name}"
    mlflow_store.client().create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    return name


def test_the_store_is_the_workspace_s_sqlite_unless_the_environment_names_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert mlflow_store.tracking_uri(tmp_path) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert mlflow_store.tracking_uri(tmp_path) == "http://tracking.example:5000"


def test_a_new_experiment_keeps_its_artifacts_beside_its_sqlite_store_not_where_the_process_runs(
        tmp_path: Path) -> None:
    assert mlflow_store.artifact_root(f"sqlite:///{tmp_path / 'mlflow.db'}", "ringflow") == \
        (tmp_path / "artifacts" / "ringflow").as_uri()
    assert mlflow_store.artifact_root("http://tracking.example:5000", "ringflow") is None  # the server's own


def test_a_run_holds_its_params_as_text_and_its_tags_and_comes_first_among_the_newest(experiment: str) -> None:
    first = mlflow_store.start_run(experiment, {"np": 2}, {"kind": "a"})
    second = mlflow_store.start_run(experiment, {"np": 4, "model": "small_cnn"}, {"kind": "b"})
    run = mlflow_store.client().get_run(second)
    assert run.data.params == {"np": "4", "model": "small_cnn"} and run.data.tags["kind"] == "b"
    newest = mlflow_store.newest_runs(experiment, max_results=5)
    assert [found.info.run_id for found in newest] == [second, first]
    assert [found.info.run_id for found in mlflow_store.newest_runs(experiment, "params.np = '2'")] == [first]
    assert mlflow_store.newest_runs("no-such-experiment") == []


def test_metrics_artifacts_tags_and_the_end_of_a_run(experiment: str, tmp_path: Path) -> None:
    run_id = mlflow_store.start_run(experiment, {}, {})
    mlflow_store.log_metrics(run_id, {"loss": 0.5, "accuracy": 0.9}, step=3)
    (tmp_path / "report.txt").write_text("fine\n")
    mlflow_store.log_artifacts(run_id, tmp_path / "report.txt", "reports")
    mlflow_store.set_tags(run_id, {"gate": None, "n": 1})
    mlflow_store.end_run(run_id, ok=True)
    run = mlflow_store.client().get_run(run_id)
    assert run.data.metrics == {"loss": 0.5, "accuracy": 0.9} and run.info.status == "FINISHED"
    assert (run.data.tags["gate"], run.data.tags["n"]) == ("", "1")
    assert Path(mlflow_store.artifact_location(run_id, "reports/report.txt")).read_text() == "fine\n"
    mlflow_store.reopen_run(run_id)
    assert mlflow_store.client().get_run(run_id).info.status == "RUNNING"


def test_a_block_that_raises_marks_its_run_failed_and_the_error_goes_on(experiment: str) -> None:
    run_id = mlflow_store.start_run(experiment, {}, {})
    with pytest.raises(KeyboardInterrupt), mlflow_store.failing_marks_run(run_id):
        raise KeyboardInterrupt  # Ctrl-C too
    assert mlflow_store.client().get_run(run_id).info.status == "FAILED"


def test_a_tracking_server_that_does_not_answer_ends_the_block_in_ringflow_s_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    unused_tcp_port = free_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{unused_tcp_port}")  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(mlflow_store.TrackingServerAway) as raised, mlflow_store.failing_marks_run("abc123"):
        mlflow_store.client().get_run("abc123")
    assert str(raised.value) == (f"the tracking server http://127.0.0.1:{unused_tcp_port} did not answer within "
                                 "tracking.retry_minutes: run abc123 stopped; its checkpoints are kept and --resume "
                                 "continues it once the server is back")
    assert raised.value.retryable is False  # the step's retry would wait as long again


def test_an_error_the_server_answered_is_not_taken_for_a_server_away(experiment: str) -> None:
    assert not mlflow_store.server_away(RuntimeError("failed with exception Max retries exceeded"))  # SQLite store


def logged_at_once(runs: list[str], given: object) -> list[BaseException]:
    """Each run logs the dataset in its own thread, all at the same moment; the errors they met."""
    import threading
    start, errors = threading.Barrier(len(runs)), []

    def log(run_id: str) -> None:
        start.wait()
        try:
            mlflow_store.log_dataset(run_id, given)
        except Exception as error:  # what the test reports
            errors.append(error)
    threads = [threading.Thread(target=log, args=(run_id,)) for run_id in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_runs_that_log_the_same_dataset_at_once_each_get_it(experiment: str) -> None:
    import time

    from tasks.params import load_params
    from tasks.tracking.run_labels import dataset_input
    from tests.tasks.tracking.test_run_labels import MANIFEST
    runs = [mlflow_store.start_run(experiment, {}, {}) for _ in range(4)]
    for digest in range(6):  # each round: 4 runs log one new dataset at the same moment (their store's insert races)
        given = dataset_input(load_params({}), f"race-{digest}-{time.monotonic_ns()}", "data/prepared", MANIFEST)
        errors = logged_at_once(runs, given)
        assert not errors, errors[0]
    for run_id in runs:
        assert len(mlflow_store.client().get_run(run_id).inputs.dataset_inputs) == 6
