#!/usr/bin/env bash
# On another host of the team: a worker of the remote pool (ringflow-remote) that `make services` deployed. Each
# deployment run happens in a fresh clone of the deployment's commit, set up in this checkout's environment
# (scripts/setup.sh with RINGFLOW_VENV: seconds when nothing changed), tracked on the team's servers.
#   scripts/remote_worker.sh CLIENT_ENV     # the services' .services/client.env, copied to this host (mode 0600)
# Run `make setup` here first. Ctrl-C stops the worker.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -r "${1:-}" ]; then
  echo "error: usage: scripts/remote_worker.sh CLIENT_ENV (a copy of the services' .services/client.env)" >&2
  exit 2
fi
[ -x .venv/bin/prefect ] || { echo "error: no environment in $PWD/.venv: run make setup" >&2; exit 2; }
set -a
# shellcheck disable=SC1090
. "$1"
set +a
RINGFLOW_VENV=$(cd .venv && pwd -P)
export RINGFLOW_VENV PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
exec .venv/bin/prefect worker start --pool ringflow-remote --name "ringflow-worker-$(hostname)"
