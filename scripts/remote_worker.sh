#!/usr/bin/env bash
# On another host of the team: a worker of the remote pool (ringflow-remote) that `make services` deployed. Each
# deployment run happens in a fresh clone of the deployment's commit, set up in this checkout's environment
# (scripts/setup.sh with RINGFLOW_VENV: seconds when nothing changed), tracked on the team's servers. The worker
# (servers/worker.py) first checks each flow run against the record of what was deployed, and refuses one whose
# pool template or deployment was changed through the API since.
#   scripts/remote_worker.sh CLIENT_ENV DEPLOYED
#     CLIENT_ENV: the services' .services/client.env, copied to this host (mode 0600)
#     DEPLOYED:   the services' .services/deployed-remote.json, copied to this host (by the team, in a folder only
#                 this host's trusted users write: whoever changes it chooses what the worker runs)
# Run `make setup` here first. Ctrl-C stops the worker.
set -euo pipefail
if [ $# -ne 2 ] || [ ! -r "$1" ]; then
  echo "error: usage: scripts/remote_worker.sh CLIENT_ENV DEPLOYED (copies of the services' .services/client.env" \
       "and .services/deployed-remote.json)" >&2
  exit 2
fi
client_env=$(realpath -- "$1")
deployed=$(realpath -m -- "$2")
cd "$(dirname "$0")/.."
[ -x .venv/bin/prefect ] || { echo "error: no environment in $PWD/.venv: run make setup" >&2; exit 2; }
set -a
# shellcheck disable=SC1090
. "$client_env"
set +a
RINGFLOW_VENV=$(cd .venv && pwd -P)
export RINGFLOW_VENV PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
# a record that cannot be read, or is another pool's: one line, exit 2, nothing started
exec .venv/bin/python -m servers.worker --deployed "$deployed" --pool ringflow-remote \
  --name "ringflow-worker-$(hostname)"
