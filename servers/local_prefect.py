"""The local Prefect server of a checkout: started once, when a flow runs with no PREFECT_API_URL, and reused.

Without an API URL, Prefect starts a temporary server for every run (10-16 s, its UI gone with the run). Instead the
first run starts `prefect server start` on 127.0.0.1 (servers/processes.py: a session of its own, its pid noted in
`server.pid`, its log `server.log`), with its SQLite database in the workspace's `.prefect/` (the checkout's, unless
RINGFLOW_WORKSPACE names another), and notes its port in `.prefect/ringflow-server.json`; later runs find it there
and use it. A stale note (a dead process, another Prefect version, a server that does not answer) is replaced;
`make stop` stops it.
This module imports no Prefect, so a flow's command line knows the API address before Prefect reads its settings.

    python -m servers.local_prefect start|status|stop
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import urllib.request
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Iterator

from servers import processes
from tasks.paths import WORKSPACE

HOME_DIR = WORKSPACE.root / ".prefect"  # the server's home: its database, its log and this module's note
STATE_FILE_NAME = "ringflow-server.json"
SERVER = "server"  # its name in the home: server.pid (processes.py's note), server.log
PID_FILE_NAME = f"{SERVER}.pid"
DEFAULT_PORT = 4200  # Prefect's own default; another free port when it is taken
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


class ServerError(RuntimeError):
    """The local Prefect server could not be started."""


@dataclass(frozen=True)
class ServerNote:
    """What a started server left in its home: enough to find it, check it is ours and stop it."""
    pid: int
    port: int
    prefect_version: str

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def read_note(home: Path) -> ServerNote | None:
    try:
        return ServerNote(**json.loads((home / STATE_FILE_NAME).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def is_ours(home: Path, note: ServerNote) -> bool:
    """Whether the noted server is still the process this home started (its pid file: that process, this boot)."""
    return processes.live_pid(home / PID_FILE_NAME) == note.pid


def answers(note: ServerNote, timeout: float = 2.0) -> bool:
    """Whether the server answers its health check with this Prefect's version."""
    try:
        with urllib.request.urlopen(f"{note.api_url}/admin/version", timeout=timeout) as response:
            return response.status == 200 and json.load(response) == note.prefect_version
    except (OSError, ValueError):
        return False


def live_server(home: Path) -> ServerNote | None:
    """The noted server if it is ours, alive, of this Prefect version and answering; else None."""
    note = read_note(home)
    if note is None or note.prefect_version != version("prefect") or not is_ours(home, note):
        return None
    return note if answers(note) else None


def port_is_free(port: int) -> bool:
    """Whether the server could listen on the port (which it binds with SO_REUSEADDR, as uvicorn does)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_port(preferred: int) -> int:
    """The preferred port when it is free, else one the kernel picks."""
    if port_is_free(preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_environment(home: Path) -> dict[str, str]:
    """The server's environment: its home, no telemetry, no API URL of its own to talk to."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_API_")}
    return env | {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                  "PREFECT_UI_API_URL": ""}


def start(home: Path, port: int) -> ServerNote:
    """`prefect server start` in a session of its own (a terminal's Ctrl-C does not reach it), until it answers."""
    prefect = Path(sys.executable).parent / "prefect"
    command = [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    pid = processes.start(SERVER, command, home, home, server_environment(home), cwd=home)
    note = ServerNote(pid, port, version("prefect"))
    (home / STATE_FILE_NAME).write_text(json.dumps(asdict(note)))
    try:
        processes.wait_answer(f"local Prefect {SERVER}", lambda: answers(note, timeout=1.0), home / PID_FILE_NAME,
                              home / f"{SERVER}.log", START_TIMEOUT_S)
    except processes.ServerFailed as failed:
        stop_noted(home)
        raise ServerError(str(failed)) from None
    return note


@contextmanager
def home_lock(home: Path) -> Iterator[None]:
    """One starter at a time (two runs started at once share one server)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "ringflow-server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_server(home: Path = HOME_DIR, port: int = DEFAULT_PORT) -> tuple[ServerNote, bool]:
    """The home's live server, started (replacing a stale one) when there is none, on its previous port or else
    `port` when free; (it, whether it was started)."""
    with home_lock(home):
        if note := live_server(home):
            return note, False
        stop_noted(home)
        previous = read_note(home)
        return start(home, choose_port(previous.port if previous else port)), True


def stop_noted(home: Path) -> bool:
    """Stop the noted server if it is still ours (whatever state it is in); whether there was one."""
    note = read_note(home)
    if note is None or processes.live_group(home / PID_FILE_NAME) != note.pid:
        return False
    processes.stop_groups(STOP_TIMEOUT_S, [home / PID_FILE_NAME], home / "stop.log")
    return True


def stop_server(home: Path = HOME_DIR) -> bool:
    with home_lock(home):
        return stop_noted(home)


def main(argv: list[str] | None = None) -> int:
    command = (argv if argv is not None else sys.argv[1:] or ["status"])[0]
    if command == "stop":
        print("local Prefect server stopped" if stop_server() else "no local Prefect server was running")
    elif command == "start":
        print(f"local Prefect server: {ensure_server()[0].ui_url}")
    elif command == "status":
        running = live_server(HOME_DIR)
        print(f"local Prefect server: {running.ui_url}" if running else "no local Prefect server is running")
    else:
        print(f"error: unknown command {command!r} (start, status or stop)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
