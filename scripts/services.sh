#!/usr/bin/env bash
# make services: a team's ringflow servers on this machine, in the foreground (PostgreSQL, MLflow and Prefect on it,
# the work pools, the deployments and a worker); Ctrl-C (or `make services-down` from another shell) stops them.
# servers/services.py says what runs where, as whom, and with which settings.
#   scripts/services.sh up | down
#   scripts/services.sh stop mlflow|prefect [--kill]    # one server away (maintenance, or a crash to try)
#   scripts/services.sh start mlflow|prefect            # and back, on the same data
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "error: no environment in $PWD/.venv: run make setup" >&2; exit 1; }
exec .venv/bin/python -m servers services "$@"
