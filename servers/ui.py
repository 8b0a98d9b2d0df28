"""`ringflow ui` (make ui): MLflow's UI on the workspace's store (mlruns/mlflow.db, or the SQLite file
MLFLOW_TRACKING_URI names), on 127.0.0.1 at tracking.ui_url's port, after the address of the experiment's training
runs. A tracking server serves its own UI."""
from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlsplit

from tasks.params import ParamsError, load_params
from tasks.tracking.mlflow_store import tracking_uri
from tasks.tracking.run_log import runs_link
from tasks.tracking.server import use_tracking
from tasks.tracking.uris import is_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ringflow ui", description=__doc__)
    parser.add_argument("--port", type=int, help="the UI's port (tracking.ui_url's, else 5000)")
    args = parser.parse_args(argv)
    try:
        params = load_params({"tracking.ui_url": f"http://127.0.0.1:{args.port}"} if args.port else None)
        use_tracking(params.tracking)
    except ParamsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if is_server(store := tracking_uri()):
        print(f"the runs are on the tracking server {store}, whose own UI shows them")
        return 0
    print(f"MLflow UI, ringflow's training runs: {runs_link(params)}", flush=True)
    mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
    port = str(args.port or urlsplit(params.tracking.ui_url).port or 5000)
    os.execve(mlflow, [mlflow, "ui", "--backend-store-uri", store, "--host", "127.0.0.1", "--port", port],
              os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
