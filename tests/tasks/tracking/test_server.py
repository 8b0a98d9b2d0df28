"""A tracking server is asked before anything starts: one line for one that does not answer, is not MLflow, or wants
credentials this shell does not give; nothing for the embedded store."""
from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path
from typing import Callable, Generator, Iterator

import pytest

from tasks.params import ParamsError, TrackingParams
from tasks.tracking import mlflow_store
from tasks.tracking.credentials import credentials_kept_for
from tasks.tracking.server import (
    check_tracking,
    credentials_header,
    retry_settings,
    use_tracking,
    without_credentials,
)
from tests.helpers import free_port

Seen = list[tuple[str, str, str | None]]  # (method, path, Authorization header) of each request a server had
Answer = tuple[int, dict[str, str], bytes]  # status, headers, body
Server = Generator[str, None, None]  # a server's address while it runs; close() stops it


def serving(answer: Callable[[str, str], Answer], record: Callable[[str, str, str | None], object]) -> Server:
    """A plain HTTP server on 127.0.0.1 (no MLflow) that answers each request as `answer(method, path)` says and
    records it, with its Authorization header (`record(method, path, authorization)`); its address."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def respond(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            record(self.command, self.path, self.headers.get("Authorization"))
            status, headers, body = answer(self.command, self.path)
            self.send_response(status)
            for name, value in (headers | {"Content-Length": str(len(body))}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = respond  # noqa: N815 (http.server's names)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def answering(status: int, body: bytes, seen: list[str | None] | None = None) -> Server:
    """A plain HTTP server that answers every request with `status` (no MLflow: what a wrong URL reaches); each
    request's Authorization header into `seen`."""
    kept = [] if seen is None else seen
    yield from serving(lambda method, path: (status, {}, body),
                       lambda method, path, authorization: kept.append(authorization))


NOT_FOUND = json.dumps({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "not here"}).encode()
EXPERIMENT = {"experiment_id": "1", "name": "ringflow", "artifact_location": "mlflow-artifacts:/1",
              "lifecycle_stage": "active"}
MLFLOW_ANSWERS: dict[str, object] = {
    "experiments/search": {"experiments": [EXPERIMENT]}, "experiments/create": {"experiment_id": "1"},
    "runs/search": {"runs": []}, "registered-models/search": {"registered_models": []},
    "model-versions/search": {"model_versions": []}}


def mlflow_like(method: str, path: str, answers: dict[str, object] = MLFLOW_ANSWERS) -> Answer:
    """What a tracking server holding one empty experiment answers (enough for a lookup and a copy of it)."""
    endpoint = path.split("?")[0].split("/mlflow/", 1)[-1]
    found = answers.get(endpoint)
    if found is None:
        return 404, {"Content-Type": "application/json"}, NOT_FOUND
    return 200, {"Content-Type": "application/json"}, json.dumps(found).encode()


def mlflow_server(seen: Seen) -> Server:
    yield from serving(mlflow_like, lambda method, path, authorization: seen.append((method, path, authorization)))


def redirecting_to(target: str, seen: Seen) -> Server:
    """A server that sends every request on to `target` (307: the same method and body)."""
    yield from serving(lambda method, path: (307, {"Location": f"{target}{path}"}, b""),
                       lambda method, path, authorization: seen.append((method, path, authorization)))


@pytest.fixture
def not_mlflow() -> Iterator[str]:
    yield from answering(404, b"<html>no such page</html>")


@pytest.fixture
def locked() -> Iterator[str]:
    yield from answering(401, b"You are not authenticated.")


def test_the_embedded_store_is_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert check_tracking(None, "ringflow") is None


def test_a_server_that_does_not_answer_is_one_line_naming_the_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///unused.db")  # so that the test's end puts back what was
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # (use_tracking sets the variable for this process)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")  # and this one where unset
    with pytest.raises(ParamsError, match=rf"^tracking.uri {uri}: no MLflow server answers there \(.*refused.*\)$"):
        use_tracking(TrackingParams(uri=uri))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri.replace("//", "//ringflow:hunter2@"))
    shown = uri.replace("//", "//ringflow:***@")
    assert check_tracking(None, "ringflow").startswith(f"MLFLOW_TRACKING_URI {shown}: no MLflow server answers there")


def test_a_server_that_is_not_mlflow_or_wants_credentials(not_mlflow: str, locked: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert check_tracking(not_mlflow, "x") == (f"tracking.uri {not_mlflow}: answered HTTP 404 Not Found: is it an "
                                               "MLflow tracking server?")
    assert check_tracking(locked, "x").startswith(f"tracking.uri {locked}: asks for credentials (HTTP 401): set "
                                                  "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
    with_password = locked.replace("//", "//ringflow:hunter2@")  # as MLFLOW_TRACKING_URI may give them
    monkeypatch.setenv("MLFLOW_TRACKING_URI", with_password)
    shown = locked.replace("//", "//ringflow:***@")
    assert check_tracking(None, "x").startswith(f"MLFLOW_TRACKING_URI {shown}: refused the credentials given "
                                                "(HTTP 401)")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ringflow")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong")
    assert check_tracking(locked, "x").startswith(f"tracking.uri {locked}: refused the credentials given (HTTP 401)")


def test_a_password_in_the_uri_is_sent_as_mlflow_sends_it(not_mlflow: str) -> None:
    address, header = without_credentials(not_mlflow.replace("//", "//ringflow:p%40ss@"))
    assert (address, header) == (not_mlflow, {"Authorization": "Basic cmluZ2Zsb3c6cEBzcw=="})
    assert without_credentials(not_mlflow) == (not_mlflow, {})


def test_credentials_travel_as_mlflow_sends_them() -> None:
    assert credentials_header({"MLFLOW_TRACKING_USERNAME": "u", "MLFLOW_TRACKING_PASSWORD": "p"}) == \
        {"Authorization": "Basic dTpw"}
    assert credentials_header({"MLFLOW_TRACKING_TOKEN": "t"}) == {"Authorization": "Bearer t"}
    assert credentials_header({}) == {}


@pytest.mark.parametrize("uri, problem", [
    ("ftp://host", "is not an MLflow tracking URI"),
    ("http://ringflow:secret@host:5000", "holds credentials, which would be recorded with the run"),
])
def test_a_bad_tracking_uri_is_refused(uri: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TrackingParams(uri=uri)
    assert TrackingParams(uri="http://host:5000/").uri == "http://host:5000"


def test_the_client_tries_a_server_that_is_away_every_few_seconds_for_tracking_retry_minutes() -> None:
    settings = retry_settings(300)
    pause = float(settings["MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"])  # the most between two tries (no exponential part)
    assert settings["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "0" and pause <= 4
    assert int(settings["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) * pause / 2 >= 300  # on average, 5 minutes of tries
    assert int(settings["_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT"]) >= int(settings["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])
    assert retry_settings(1)["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"


def test_credentials_go_only_to_the_server_they_were_issued_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """client.env's credentials (issued for the team's server) and a run whose tracking.uri names another server:
    that server gets no Authorization header, the run says so in one line, and its environment (its ranks') holds
    no credential; to their own server they still go."""
    seen: list[str | None] = []
    other = answering(404, b"not mlflow", seen)
    uri = next(other)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///unused.db")  # recorded: the test's end puts it back
        monkeypatch.setenv("RINGFLOW_CREDENTIALS_FOR", "http://10.0.0.5:5000")
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ringflow")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2")
        said: list[str] = []
        with pytest.raises(ParamsError, match="answered HTTP 404"):
            use_tracking(TrackingParams(uri=uri), warn=said.append)
        assert seen and seen == [None] * len(seen)  # asked, without the credentials
        assert said == [f"warning: tracking.uri {uri}: this environment's MLflow credentials "
                        "(MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD) are for http://10.0.0.5:5000, not sent "
                        "to another server"]
        assert "MLFLOW_TRACKING_PASSWORD" not in os.environ and "MLFLOW_TRACKING_USERNAME" not in os.environ
    finally:
        other.close()
    environ = {"RINGFLOW_CREDENTIALS_FOR": "http://Team:5000", "MLFLOW_TRACKING_PASSWORD": "p"}
    assert credentials_kept_for("http://team:5000/", environ) is None and environ["MLFLOW_TRACKING_PASSWORD"] == "p"


BASIC = "Basic cmluZ2Zsb3c6aHVudGVyMg=="  # ringflow:hunter2, the `credentials` fixture's


def authorizations(seen: Seen) -> set[str | None]:
    """The Authorization headers a server was sent (asserting it was asked at all)."""
    assert seen, "the server was never asked"
    return {authorization for _, _, authorization in seen}


def test_credentials_issued_for_another_server_are_not_sent_to_the_environment_s_tracking_uri(
        credentials: pytest.MonkeyPatch) -> None:
    """client.env's credentials, issued for A, and a shell whose MLFLOW_TRACKING_URI names B: neither the check nor
    the real MLflow client sends B an Authorization header (one line says why); pointed at A, they go to A."""
    from mlflow.tracking import MlflowClient
    issued_seen: Seen = []
    other_seen: Seen = []
    issued, other = mlflow_server(issued_seen), mlflow_server(other_seen)
    issued_for, elsewhere = next(issued), next(other)
    try:
        credentials.setenv("RINGFLOW_CREDENTIALS_FOR", issued_for)
        credentials.setenv("MLFLOW_TRACKING_URI", elsewhere)
        said: list[str] = []
        use_tracking(TrackingParams(), warn=said.append)
        assert MlflowClient().get_experiment_by_name("ringflow") is None  # asked B
        assert authorizations(other_seen) == {None}
        assert said == [f"warning: MLFLOW_TRACKING_URI {elsewhere}: this environment's MLflow credentials "
                        f"(MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD) are for {issued_for}, not sent to "
                        "another server"]
        credentials.setenv("MLFLOW_TRACKING_USERNAME", "ringflow")
        credentials.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2")
        credentials.setenv("MLFLOW_TRACKING_URI", f"{issued_for}/")  # the same origin
        use_tracking(TrackingParams(), warn=said.append)
        assert MlflowClient().get_experiment_by_name("ringflow") is None and len(said) == 1
        assert authorizations(issued_seen) == {BASIC}
    finally:
        issued.close()
        other.close()


def test_credentials_no_variable_names_a_server_for_are_sent_nowhere(credentials: pytest.MonkeyPatch) -> None:
    """Credentials in the environment, neither RINGFLOW_CREDENTIALS_FOR nor MLFLOW_TRACKING_URI set: a run whose
    tracking.uri names a server does not send them there."""
    from mlflow.tracking import MlflowClient
    seen: Seen = []
    server = mlflow_server(seen)
    uri = next(server)
    try:
        said: list[str] = []
        use_tracking(TrackingParams(uri=uri), warn=said.append)
        MlflowClient().search_experiments()
        assert authorizations(seen) == {None}
        assert said == [f"warning: tracking.uri {uri}: this environment's MLflow credentials "
                        "(MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD) are sent to no server: neither "
                        "RINGFLOW_CREDENTIALS_FOR nor MLFLOW_TRACKING_URI names the one they were issued for"]
        assert "MLFLOW_TRACKING_PASSWORD" not in os.environ
    finally:
        server.close()


def test_a_redirect_to_another_origin_never_carries_the_credentials(credentials: pytest.MonkeyPatch) -> None:
    """The server the credentials were issued for (A) redirects every request to another port (B): the check
    before the run and the real MLflow client (a lookup, a search, a creation: GET and POST) send them to A only."""
    from mlflow.tracking import MlflowClient
    issued_seen: Seen = []
    other_seen: Seen = []
    other = mlflow_server(other_seen)
    elsewhere = next(other)
    issued = redirecting_to(elsewhere, issued_seen)
    issued_for = next(issued)
    try:
        credentials.setenv("RINGFLOW_CREDENTIALS_FOR", issued_for)
        credentials.setenv("MLFLOW_TRACKING_URI", issued_for)
        said: list[str] = []
        use_tracking(TrackingParams(), warn=said.append)
        client = MlflowClient()
        assert client.get_experiment_by_name("ringflow") is None
        assert [found.name for found in client.search_experiments()] == ["ringflow"]
        assert client.create_experiment("new") == "1"
        assert said == [] and authorizations(issued_seen) == {BASIC}
        assert {method for method, _, _ in other_seen} == {"GET", "POST"}
        assert authorizations(other_seen) == {None}
    finally:
        issued.close()
        other.close()


def test_an_experiment_keeping_its_artifacts_on_another_server_is_refused(credentials: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """An experiment whose artifact location is an HTTP server the credentials were not issued for (anyone who may
    create the experiment chooses it): the run is refused in one line before MLflow's client writes an artifact
    there with the credentials."""
    from mlflow.tracking import MlflowClient
    seen: Seen = []
    server = mlflow_server(seen)
    elsewhere = next(server)
    try:
        credentials.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
        credentials.setenv("RINGFLOW_CREDENTIALS_FOR", "http://10.0.0.5:5000")
        MlflowClient().create_experiment("planted", artifact_location=f"{elsewhere}/artifacts")
        (tmp_path / "model.txt").write_text("weights")
        with pytest.raises(ParamsError) as refused:
            run_id = mlflow_store.start_run("planted", {}, {})
            mlflow_store.log_artifacts(run_id, tmp_path / "model.txt")  # what the run does next
        assert str(refused.value) == (f"experiment planted keeps its artifacts at {elsewhere}/artifacts: this "
                                      "environment's MLflow credentials (MLFLOW_TRACKING_USERNAME, "
                                      "MLFLOW_TRACKING_PASSWORD) are for http://10.0.0.5:5000, not sent to another "
                                      "server")
        assert seen == []
    finally:
        server.close()
