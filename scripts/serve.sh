#!/usr/bin/env bash
# make serve: a Prefect server on 127.0.0.1 (its SQLite database under .prefect/), the local process work pool,
# the deployments of prefect.yaml, and a worker. Ctrl-C stops them all. PREFECT_PORT picks the port (4200).
#   scripts/serve.sh            # all of the above (servers/serve.py)
#   scripts/serve.sh deploy     # only the work pool(s) and the deployments, on the server of PREFECT_API_URL
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "error: no environment in $PWD/.venv: run make setup" >&2; exit 1; }
exec .venv/bin/python -m servers serve "$@"
