"""`make serve` (scripts/serve.sh) refuses a port another server holds, in one line, before it starts anything:
that server would answer the health check in place of its own, take the deployments and outlive its Ctrl-C (a
checkout's local Prefect server, left running by `make run`, is on Prefect's default port)."""
from __future__ import annotations

import http.server
import subprocess
import threading
from pathlib import Path

from tests.helpers import ROOT, quiet_env


class Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        return


def test_a_port_another_server_answers_on_is_refused_in_one_line(tmp_path: Path) -> None:
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    try:
        done = subprocess.run(["bash", "scripts/serve.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env=quiet_env(PREFECT_PORT=str(port), PREFECT_HOME=str(tmp_path / "prefect")))
    finally:
        other.shutdown()
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: port {port} is taken (make stop stops this checkout's local Prefect server; PREFECT_PORT=N make "
        "serve takes another port)"), done.stderr
    assert not (tmp_path / "prefect").exists()  # nothing started
