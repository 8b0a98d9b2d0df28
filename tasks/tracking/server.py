"""A tracking server asked before anything starts: does it answer, and does it take this shell's credentials
(MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN)? Plain HTTP, no MLflow import:
the command line checks it in milliseconds."""
from __future__ import annotations

import base64
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from pathlib import Path
from typing import IO, Callable, Mapping

from tasks.params import ParamsError, TrackingParams
from tasks.tracking.credentials import credentials_kept_for, credentials_refusal, origin
from tasks.tracking.mlflow_store import tracking_uri, use_tracking_uri
from tasks.tracking.uris import is_server, shown

CHECK_SECONDS = 10


def basic_auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def credentials_header(environ: Mapping[str, str]) -> dict[str, str]:
    """The Authorization header MLflow's client sends for these settings (none without them)."""
    user, password = environ.get("MLFLOW_TRACKING_USERNAME"), environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return basic_auth(user, password)
    token = environ.get("MLFLOW_TRACKING_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def where_from(uri: str, configured: str | None) -> str:
    """How the line names the store: by the parameter or the variable that chose it."""
    return f"tracking.uri {shown(uri)}" if configured else f"MLFLOW_TRACKING_URI {shown(uri)}"


def without_credentials(uri: str) -> tuple[str, dict[str, str]]:
    """A URI's `user:password@` (which MLflow's client sends as basic authentication) as that header, and the URI
    without it."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None:
        return uri, {}
    user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), basic_auth(user, password)


class SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """Follows a redirect as MLflow's client does, but the Authorization header never to another origin (urllib's
    own handler copies every header to wherever the server points)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: HTTPMessage, newurl: str) -> urllib.request.Request | None:
        redirected = super().redirect_request(req, fp, code, msg, headers, newurl)
        if redirected is not None and origin(redirected.full_url) != origin(req.full_url):
            redirected.remove_header("Authorization")
        return redirected


def server_problem(uri: str, experiment: str, environ: Mapping[str, str]) -> str | None:
    """None when the server answers an experiment lookup with these credentials (the environment's, if issued for
    it, or the URI's own); else what is wrong."""
    query = urllib.parse.urlencode({"experiment_name": experiment})
    address, in_uri = without_credentials(uri)
    refusal = credentials_refusal(uri, environ)
    headers = (credentials_header(environ) if refusal is None else {}) or in_uri
    request = urllib.request.Request(f"{address}/api/2.0/mlflow/experiments/get-by-name?{query}", headers=headers)
    try:
        with urllib.request.build_opener(SameOriginCredentials).open(request, timeout=CHECK_SECONDS):
            return None
    except urllib.error.HTTPError as error:
        if error.code == 404 and b"RESOURCE_DOES_NOT_EXIST" in error.read():
            return None  # the experiment is made by the first run
        if error.code in (401, 403):
            return refused(error.code, bool(headers), refusal)
        return f"answered HTTP {error.code} {error.reason}: is it an MLflow tracking server?"
    except (urllib.error.URLError, OSError) as error:
        return f"no MLflow server answers there ({getattr(error, 'reason', error)})"
    except ValueError as error:  # http.client.InvalidURL: a port that is not a number, ...
        return f"is not a URL this machine can ask ({error})"


def refused(code: int, sent: bool, refusal: str | None) -> str:
    """The line for a server that wants credentials other than those sent."""
    if refusal:
        return f"asks for credentials (HTTP {code}); {refusal}"
    given = "refused the credentials given" if sent else "asks for credentials"
    return (f"{given} (HTTP {code}): set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
            "(. .services/client.env on the services' machine)")


def check_tracking(configured: str | None, experiment: str) -> str | None:
    """One line when the run's tracking server cannot be used; None for the embedded store or a good server."""
    uri = configured or tracking_uri()
    if not is_server(uri):
        return None
    problem = server_problem(uri, experiment, os.environ)
    return f"{where_from(uri, configured)}: {problem}" if problem else None


RETRY_PAUSE_SECONDS = 2.0  # the mean pause between the MLflow client's tries of a server that does not answer
RETRY_VARIABLES = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
                   "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER")  # the client's retries, as a user may set them


def retry_settings(seconds: float) -> dict[str, str]:
    """The MLflow client's settings that keep trying a server that does not answer for about `seconds`, a pause
    of 0 to 4 s between tries (2 on average): a server back after a restart is used again within seconds. MLflow's
    own backoff (urllib3's, factor 2: 4, 8, 16, ... s, at most 120, at most 10 retries) would leave a run idle for
    as long again as the server was away."""
    retries = max(1, math.ceil(seconds / RETRY_PAUSE_SECONDS))
    return {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(retries),
            "_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT": str(max(retries, 10)),  # MLflow's limit on the retries
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",  # no exponential part: the pause is the jitter alone
            "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": str(2 * RETRY_PAUSE_SECONDS)}


def use_tracking(tracking: TrackingParams, warn: Callable[[str], None] = print) -> None:
    """This process (and what it starts) tracks where the run's params say, trying a server that does not answer
    every 2 s or so for tracking.retry_minutes (unless the environment sets the client's retries: RETRY_VARIABLES);
    a server that cannot be used stops it here, in one line, before anything starts. Credentials are sent only to
    their own server (the one they were issued for): for another, they are taken out of the environment first."""
    uri = tracking.uri or tracking_uri()
    if said := credentials_kept_for(uri, os.environ):
        warn(f"warning: {where_from(uri, tracking.uri)}: {said}")
    use_tracking_uri(tracking.uri)
    if is_server(tracking_uri()) and not any(name in os.environ for name in RETRY_VARIABLES):
        os.environ.update(retry_settings(tracking.retry_minutes * 60))
    if problem := check_tracking(tracking.uri, tracking.experiment):
        raise ParamsError(problem)


def store_problem(uri: str) -> str | None:
    """One line when a store given by URI (copy-runs' --to and --from) cannot be used."""
    if is_server(uri):
        problem = server_problem(uri, "Default", os.environ)
        return f"{shown(uri)}: {problem}" if problem else None
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return f"no MLflow store at {uri.removeprefix('sqlite:///')}"
    return None
