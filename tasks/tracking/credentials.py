"""Which server the environment's MLflow credentials go to: only the one they were issued for
(RINGFLOW_CREDENTIALS_FOR, else MLFLOW_TRACKING_URI), never another origin, nor an experiment's artifacts kept on
another server."""
from __future__ import annotations

import contextlib
import os
import urllib.parse
from typing import Iterator, Mapping

from tasks.tracking.uris import is_server, shown

CREDENTIAL_VARIABLES = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
CREDENTIALS_FOR = "RINGFLOW_CREDENTIALS_FOR"  # the server the environment's credentials were issued for


def origin(uri: str) -> str:
    """scheme://host:port of a URL, its port made explicit and its host lowercased (a URL whose port is not a
    number: as given)."""
    parts = urllib.parse.urlsplit(uri)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    except ValueError:
        return uri
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def credentials_refusal(uri: str, environ: Mapping[str, str]) -> str | None:
    """Why the environment's MLflow credentials do not go to the server `uri`: they go only to the one they were
    issued for, RINGFLOW_CREDENTIALS_FOR (make services' client.env names it), else the environment's own
    MLFLOW_TRACKING_URI; to none when neither names a server. None when they may go there (or there are none)."""
    given = [name for name in CREDENTIAL_VARIABLES if environ.get(name)]
    if not given or not is_server(uri):
        return None
    issued_for = environ.get(CREDENTIALS_FOR) or environ.get("MLFLOW_TRACKING_URI") or ""
    credentials = f"this environment's MLflow credentials ({', '.join(given)})"
    if not is_server(issued_for):
        return (f"{credentials} are sent to no server: neither {CREDENTIALS_FOR} nor MLFLOW_TRACKING_URI names the "
                "one they were issued for")
    if origin(uri) == origin(issued_for):
        return None
    return f"{credentials} are for {shown(issued_for)}, not sent to another server"


def credentials_kept_for(uri: str, environ: dict[str, str] | os._Environ) -> str | None:
    """The environment's MLflow credentials taken out of it when they are not for the server `uri` (MLflow's
    client, and every process this one starts, then has none); why, else None."""
    refusal = credentials_refusal(uri, environ)
    if refusal:
        for name in CREDENTIAL_VARIABLES:
            environ.pop(name, None)
    return refusal


def foreign_artifacts(what: str, location: str) -> str | None:
    """One line when `what` (an experiment, a model version) keeps its artifacts on an HTTP server the
    environment's credentials were not issued for (MLflow's client sends them with every artifact it writes or
    reads there); else None."""
    refusal = credentials_refusal(location, os.environ)
    return f"{what} keeps its artifacts at {shown(location)}: {refusal}" if refusal else None


@contextlib.contextmanager
def credentials_only_for_their_server(uri: str) -> Iterator[None]:
    """Within: the environment holds its MLflow credentials only if they were issued for `uri` (MLflow's client
    reads them at every request, so two clients of one process, each in such a block, send them to one end)."""
    withheld = credentials_refusal(uri, os.environ) is not None
    taken = {name: os.environ.pop(name) for name in CREDENTIAL_VARIABLES if withheld and name in os.environ}
    try:
        yield
    finally:
        os.environ.update(taken)
