#!/usr/bin/env bash
# make serve: a Prefect server on 127.0.0.1 (its SQLite database under .prefect/), the local process work pool,
# the deployments of prefect.yaml, and a worker. Ctrl-C stops them all. PREFECT_PORT picks the port (4200).
#   scripts/serve.sh            # all of the above
#   scripts/serve.sh deploy     # only the work pool(s) and the deployments, on the server of PREFECT_API_URL
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
POOL=ringflow-local

deployments_on() {  # $1: a work pool; the --name arguments of prefect.yaml's deployments on it
  "$BIN/python" -c 'import sys, yaml
for d in yaml.safe_load(open("prefect.yaml"))["deployments"]:
    if d["work_pool"]["name"] == sys.argv[1]: print("--name", d["name"])' "$1"
}

deploy() {  # the local pool's deployments; with RINGFLOW_REPOSITORY (make services) the remote pool's too
  local pool names template
  # the pools' template fixes the worker's command, environment and directory (no flow run chooses them)
  "$BIN/python" -m flows.work_pools check prefect.yaml
  template=$(mktemp)
  "$BIN/python" -m flows.work_pools template "$template"
  for pool in "$POOL" ${RINGFLOW_REPOSITORY:+ringflow-remote}; do
    "$BIN/prefect" work-pool create "$pool" --type process --base-job-template "$template" --overwrite > /dev/null
    "$BIN/prefect" work-pool set-concurrency-limit "$pool" 1 > /dev/null
    names+=" $(deployments_on "$pool")"
  done
  rm -f "$template"
  # shellcheck disable=SC2086
  "$BIN/prefect" --no-prompt deploy $names
}

serve() {
  local port=${PREFECT_PORT:-4200}
  # another server there would answer the health check in this one's place (and outlive its Ctrl-C)
  "$BIN/python" -c 'import sys; from flows.local_server import port_is_free; sys.exit(not port_is_free(int(sys.argv[1])))' \
    "$port" || { echo "error: port $port is taken (make stop stops this checkout's local Prefect server;" \
                      "PREFECT_PORT=N make serve takes another port)" >&2; exit 1; }
  export PREFECT_HOME=${PREFECT_HOME:-$PWD/.prefect}
  export PREFECT_API_URL="http://127.0.0.1:${port}/api"
  mkdir -p "$PREFECT_HOME"
  "$BIN/prefect" server start --host 127.0.0.1 --port "$port" > "$PREFECT_HOME/server.log" 2>&1 &
  server=$!
  worker=
  trap stop EXIT INT TERM
  for _ in $(seq 240); do
    "$BIN/python" -c "import urllib.request as u; u.urlopen('$PREFECT_API_URL/health', timeout=2)" 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || { echo "error: the Prefect server exited; see $PREFECT_HOME/server.log" >&2; exit 1; }
    sleep 0.5
  done
  deploy
  echo "Prefect UI and API: http://127.0.0.1:${port}  (export PREFECT_API_URL=$PREFECT_API_URL)"
  echo "run:  $BIN/prefect deployment run 'training-pipeline/train' --param epochs=3 --watch"
  "$BIN/prefect" worker start --pool "$POOL" --name "ringflow-worker-$(hostname)" &
  worker=$!
  wait "$worker"
}

stop() {
  # the worker first (it may still report to the server), then the server; whatever does not stop in 30 s is killed
  local pid tick
  for pid in $worker $server; do
    kill "$pid" 2>/dev/null || continue
    for tick in $(seq 60); do
      kill -0 "$pid" 2>/dev/null || break
      # a worker that has run a flow swallows the cancel its first signal makes; its second is Prefect's own SIGKILL
      [ "$tick" != 6 ] || [ "$pid" != "$worker" ] || kill "$pid" 2>/dev/null || true
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}

case "${1:-serve}" in
  serve) serve ;;
  deploy) deploy ;;
  *) echo "error: usage: scripts/serve.sh [serve | deploy]" >&2; exit 1 ;;
esac
