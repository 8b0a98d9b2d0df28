"""What a tracking URI is and how a line shows it (one place for the store, the server checks and the credentials)."""
from __future__ import annotations

from tasks.redaction import hide_url_credentials


def shown(uri: str) -> str:
    """A URI as a line may show it: its password left out."""
    return hide_url_credentials(uri)


def is_server(uri: str) -> bool:
    """A tracking server (which also serves the artifacts), not a store in files of this machine."""
    return uri.startswith(("http://", "https://"))
