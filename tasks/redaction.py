"""The one redaction of the project (docs/security.md): a URL's credentials and a secret variable's value, hidden in
whatever is printed, logged or relayed (launch lines, the dry run's plan, every line a rank prints, tracking URIs
in lines). It imports nothing of the project, so params, the tracking store and the launcher all use it."""
from __future__ import annotations

import re

HIDDEN = "***"
# user:password@ or a bare user (often a token) before a URL's host
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*)(?P<password>:[^/@\s]*)?@",
                             re.IGNORECASE)
SECRET_NAME = re.compile(r"SECRET|PASSW|TOKEN|CREDENTIAL|PRIVATE|(^|_)KEY(_|$)", re.IGNORECASE)
ASSIGNMENT = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>'[^']*'|\"[^\"]*\"|\S*)")


def holds_credentials(text: str) -> bool:
    """Whether the text holds a URL with credentials."""
    return URL_CREDENTIALS.search(text) is not None


def hide_url_credentials(text: str) -> str:
    """Every URL's password hidden (its user kept), a bare user (a token, maybe) hidden whole."""
    def hidden(found: re.Match) -> str:
        shown_user = f"{found['user']}:{HIDDEN}" if found["password"] is not None else HIDDEN
        return f"{found['scheme']}{shown_user}@"
    return URL_CREDENTIALS.sub(hidden, text)


def is_secret(name: str, value: str = "") -> bool:
    """A variable that must never reach a command line or a log: its name says so, or its value holds a URL's
    credentials."""
    return bool(SECRET_NAME.search(name) or holds_credentials(value))


def redact(text: str) -> str:
    """`text` with every URL's credentials and every secret variable's value hidden."""
    text = hide_url_credentials(text)
    return ASSIGNMENT.sub(lambda found: f"{found['name']}={HIDDEN}" if is_secret(found["name"]) else found[0], text)
