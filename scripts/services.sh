#!/usr/bin/env bash
# make services: a team's ringflow servers on this machine, in the foreground; Ctrl-C (or `make services-down` from
# another shell) stops them, and a second `make services` finds their data again.
#   PostgreSQL (Debian's), a database cluster of ringflow's own under $SERVICES_HOME/postgres, run as an unprivileged
#     user (PostgreSQL refuses root) and listening on 127.0.0.1 only;
#   the MLflow tracking server on it (database mlflow), serving the artifacts itself (--serve-artifacts; into
#     $SERVICES_HOME/mlflow-artifacts, or SERVICES_ARTIFACTS, e.g. s3://bucket/prefix);
#   the Prefect server on it (database prefect, through asyncpg);
#   the work pool, the deployments of prefect.yaml and a worker that logs to both servers, as `make serve` does;
#   the remote pool, whose workers on other hosts (scripts/remote_worker.sh) pull this checkout's commit from a bare
#   repository here ($SERVICES_HOME/ringflow.git; RINGFLOW_REPOSITORY names another, e.g. an ssh URL).
# SERVICES_HOST (127.0.0.1) is the address the two servers bind (SERVICES_ALLOWED_HOSTS: the names MLflow answers to,
# by default that address and this machine's names). Authentication is on at every address, loopback included (every
# local user reaches 127.0.0.1): MLflow's basic-auth app, Prefect's auth string. Passwords are generated once into
# $SERVICES_HOME (files of mode 0600) and reach the servers through those files and their environment, never a
# command line; clients take them from $SERVICES_HOME/client.env. Ports: MLFLOW_PORT (5000), PREFECT_PORT (4200),
# POSTGRES_PORT (5433).
# Started by root, the servers run as an unprivileged service user (SERVICES_USER, ringflow-services, made for it;
# PostgreSQL as its own), and the worker as the user who started `make services` (sudo's user, or root;
# SERVICES_WORKER_USER names another).
#   scripts/services.sh up | down
#   scripts/services.sh stop mlflow|prefect [--kill]    # one server away (maintenance, or a crash to try)
#   scripts/services.sh start mlflow|prefect            # and back, on the same data
set -euo pipefail
# Ctrl-C stops `up` through its trap on SIGINT, and bash cannot trap a signal that was ignored when it started (as a
# background job, a CI runner or make under one starts it): `up` then runs again, with SIGINT's default action
if [ "${1:-up}" = up ] && (( 16#$(awk '/^SigIgn:/ {print $2}' "/proc/$$/status") & 2 )); then
  exec env --default-signal=INT "$BASH" "$0" "$@"
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/.venv/bin
SH=$(realpath -m "${SERVICES_HOME:-$ROOT/.services}")
HOST=${SERVICES_HOST:-127.0.0.1}
MLFLOW_PORT=${MLFLOW_PORT:-5000}
PREFECT_PORT=${PREFECT_PORT:-4200}
PG_PORT=${POSTGRES_PORT:-5433}
PGDATA=$SH/postgres/data
RUN=$SH/run
LOGS=$SH/logs
DB_ROLE=ringflow
COMPONENTS=(worker prefect mlflow)

fail() { echo "error: $*" >&2; exit 1; }
say() { printf '[services] %s\n' "$*"; }
on_network() { [ "$HOST" != 127.0.0.1 ] && [ "$HOST" != localhost ]; }
as_root() { [ "$(id -u)" = 0 ]; }

pg_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1) || true
  [ -n "$found" ] && [ -x "$found/postgres" ] || fail "PostgreSQL is not installed: run make setup"
  echo "$found"
}

db_user() {  # who runs PostgreSQL: this user, or an unprivileged one when this is root
  if ! as_root; then id -un; return; fi
  id postgres >/dev/null 2>&1 && { echo postgres; return; }
  system_user ringflow-db && echo ringflow-db
}

as_db_user() { if as_root; then runuser -u "$DB_USER" -- "$@"; else "$@"; fi; }

system_user() {  # $1 name: that system user, made when missing (two `up`s at once: the second finds it there)
  id "$1" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$1" || id "$1" >/dev/null
}

choose_users() {  # who runs the servers and who the worker; the words that start a command as each
  SERVICE_USER=$(id -un) WORKER_USER=$(id -un) AS_SERVICE=() AS_WORKER=()
  as_root || return 0
  SERVICE_USER=${SERVICES_USER:-ringflow-services}
  system_user "$SERVICE_USER"
  WORKER_USER=${SERVICES_WORKER_USER:-${SUDO_USER:-root}}
  id "$WORKER_USER" >/dev/null 2>&1 || fail "SERVICES_WORKER_USER $WORKER_USER is no user of this machine"
  # the Python this checkout's environment runs on, wherever it lies (pyenv's under /root, say): scripts/run_as.sh
  local python_home
  python_home=$(dirname "$(dirname "$(readlink -f "$BIN/python")")")
  AS_SERVICE=("$ROOT/scripts/run_as.sh" "$SERVICE_USER" "$python_home" "$ROOT/.venv" "$SH" --)
  [ "$WORKER_USER" = root ] || AS_WORKER=("$ROOT/scripts/run_as.sh" "$WORKER_USER" "$python_home" "$ROOT" "$SH" --)
}

service_files() {  # what the servers read and write: their user's own, of mode 0600 / 0700
  local folder folders=("$SH/prefect" "$SH/home")
  [ -n "${SERVICES_ARTIFACTS:-}" ] || folders+=("$SH/mlflow-artifacts")
  mkdir -p "${folders[@]}" && chmod 700 "${folders[@]}"
  [ "$SERVICE_USER" != "$(id -un)" ] || return 0
  chown "$SERVICE_USER" "$SH/pgpass" "$SH/mlflow-auth.ini"
  for folder in "${folders[@]}"; do  # (data of an earlier version, made by root: once)
    [ "$(stat -c %U "$folder")" = "$SERVICE_USER" ] || chown -R "$SERVICE_USER:" "$folder"
  done
}

secret_file() {  # $1 path: a file only its owner reads, created so (never readable by others, even briefly)
  (umask 077 && : > "$1") && chmod 600 "$1"  # a file made before with a looser mode is made private too
}

start_time() {  # $1 pid: when the process started (clock ticks since boot), empty when there is none
  sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

note_pid() {  # $1 pid, $2 file: the pid with its start time, so that no later process with that pid is taken for it
  echo "$1 $(start_time "$1")" > "$2"
}

noted_pid() {  # $1 pid file: its pid while that process is still the one noted (after a reboot it is not), else ""
  local pid started
  read -r pid started < "$1" 2>/dev/null || return 0
  [ -n "$pid" ] || return 0
  if [ -n "$started" ]; then
    [ "$(start_time "$pid")" = "$started" ] && echo "$pid"
  elif tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$BIN/"; then
    echo "$pid"  # a pid file of an earlier version (a bare pid): ours only if it runs this checkout's programs
  fi
  return 0
}

new_password() { head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32; }

write_secrets() {  # the passwords (and the MLflow app's CSRF key), each made once and kept with the data
  local name
  [ -f "$SH/secrets.env" ] || secret_file "$SH/secrets.env"
  chmod 600 "$SH/secrets.env"  # every start, whatever mode it was given meanwhile
  for name in DB_PASSWORD MLFLOW_PASSWORD PREFECT_PASSWORD MLFLOW_SECRET_KEY; do
    grep -q "^$name=" "$SH/secrets.env" || printf '%s=%s\n' "$name" "$(new_password)" >> "$SH/secrets.env"
  done
  # shellcheck disable=SC1091
  . "$SH/secrets.env"
  secret_file "$SH/pgpass"  # libpq and asyncpg read the database password here (PGPASSFILE)
  printf '127.0.0.1:*:*:%s:%s\n' "$DB_ROLE" "$DB_PASSWORD" > "$SH/pgpass"
  mlflow_auth_file
}

init_database_cluster() {
  mkdir -p "$SH/postgres"
  chown "$DB_USER" "$SH/postgres" && chmod 700 "$SH/postgres"
  as_db_user test -w "$SH/postgres" \
    || fail "PostgreSQL's user $DB_USER cannot reach $SH (a folder on the way is closed to it): set SERVICES_HOME"
  [ -f "$PGDATA/PG_VERSION" ] && return
  say "creating the database cluster in $PGDATA (PostgreSQL runs as $DB_USER)"
  local pwfile="$SH/postgres/initdb-password"
  (umask 077 && printf '%s\n' "$DB_PASSWORD" > "$pwfile") && chown "$DB_USER" "$pwfile"
  as_db_user "$PG_BIN/initdb" -D "$PGDATA" -U "$DB_ROLE" --pwfile="$pwfile" --auth=scram-sha-256 -E UTF8 \
    --locale=C.UTF-8 > "$LOGS/initdb.log" 2>&1 || { rm -f "$pwfile"; fail "initdb failed; see $LOGS/initdb.log"; }
  rm -f "$pwfile"
}

psql_run() { PGPASSFILE=$SH/pgpass "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U "$DB_ROLE" -v ON_ERROR_STOP=1 -tAq "$@"; }

refuse_taken_ports() {  # another server on a port would answer the health checks in its place (make run leaves
  # the checkout's local Prefect server on 4200)
  local -A ports=([MLFLOW_PORT]=$MLFLOW_PORT [PREFECT_PORT]=$PREFECT_PORT [POSTGRES_PORT]=$PG_PORT)
  local name
  for name in MLFLOW_PORT PREFECT_PORT POSTGRES_PORT; do
    "$BIN/python" -c 'import socket, sys
with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind((sys.argv[1], int(sys.argv[2])))' "$HOST" "${ports[$name]}" 2> /dev/null \
      || fail "port ${ports[$name]} ($name) is taken on $HOST: $name=N make services takes another (make stop stops" \
              "this checkout's local Prefect server)"
  done
}

refuse_second_start() {
  if as_db_user "$PG_BIN/pg_ctl" status -D "$PGDATA" > /dev/null 2>&1; then
    fail "the services of $SH are running already: make services-down stops them"
  fi
}

start_postgres() {
  as_db_user "$PG_BIN/pg_ctl" start -D "$PGDATA" -w -t 60 -l "$SH/postgres/server.log" \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" > /dev/null \
    || fail "PostgreSQL did not start; see $SH/postgres/server.log"
  local database
  for database in mlflow mlflow_auth prefect; do
    [ "$(psql_run -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$database'")" = 1 ] \
      || psql_run -d postgres -c "CREATE DATABASE $database" > /dev/null
  done
}

start_component() {  # $1 name, then the command: its own session (process group), its log, its pid file
  local name=$1; shift
  setsid "$@" > "$LOGS/$name.log" 2>&1 < /dev/null &
  note_pid $! "$RUN/$name.pid"
  disown  # its end is watched through the pid file; bash need not report it
}

wait_http() {  # $1 name, $2 URL: until it answers, or one line when the component died
  local name=$1 url=$2
  for _ in $(seq 360); do
    curl -s -o /dev/null "$url" && return
    [ -n "$(noted_pid "$RUN/$name.pid")" ] || fail "the $name server exited; see $LOGS/$name.log"
    sleep 0.5
  done
  fail "the $name server did not answer at $url in 3 minutes; see $LOGS/$name.log"
}

mlflow_auth_file() {
  secret_file "$SH/mlflow-auth.ini"
  printf '[mlflow]\ndefault_permission = READ\ndatabase_uri = postgresql+psycopg2://%s@127.0.0.1:%s/mlflow_auth\n%s\n%s\n' \
    "$DB_ROLE" "$PG_PORT" "admin_username = $DB_ROLE" "admin_password = $MLFLOW_PASSWORD" > "$SH/mlflow-auth.ini"
  printf 'authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n' >> "$SH/mlflow-auth.ini"
  # a password checked once per worker and 5 minutes, not at each request: its hash costs 0.1-0.4 s of the server's
  # CPU, and a run makes a few hundred requests (the password is 32 random characters; stretching adds nothing)
  printf 'auth_cache_ttl_seconds = 300\n' >> "$SH/mlflow-auth.ini"
}

allowed_hosts() {  # $1 port: the names a client may call this machine by, with and without the port
  local name names=""
  for name in "$HOST" localhost 127.0.0.1 "$(hostname)" "$(hostname -f 2>/dev/null || hostname)"; do
    names+="$name,$name:$1,"
  done
  echo "${names%,}"
}

start_mlflow() {  # the settings travel in the environment (exported in a subshell: no `env A=B` on a command line)
  (
    cd "$SH/home"  # the service user's own folder (it may not enter the checkout, nor read a .env there)
    export MLFLOW_AUTH_CONFIG_PATH="$SH/mlflow-auth.ini"  # the auth app reads it, for every run search too
    export HOME="$SH/home" PGPASSFILE="$SH/pgpass"
    export MLFLOW_FLASK_SERVER_SECRET_KEY="$MLFLOW_SECRET_KEY"
    export MLFLOW_BACKEND_STORE_URI="postgresql+psycopg2://$DB_ROLE@127.0.0.1:$PG_PORT/mlflow"
    export MLFLOW_ARTIFACTS_DESTINATION="${SERVICES_ARTIFACTS:-$SH/mlflow-artifacts}"
    # the Host headers it answers (MLflow refuses others with 403): this address and this machine's names
    export MLFLOW_SERVER_ALLOWED_HOSTS="${SERVICES_ALLOWED_HOSTS:-$(allowed_hosts "$MLFLOW_PORT")}"
    # MLflow's job runner (huey consumers for GenAI judges and trace rollups), which ringflow never asks: 4 more
    # processes and about 10 s of CPU at every start
    export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
    start_component mlflow "${AS_SERVICE[@]}" "$BIN/mlflow" server --host "$HOST" --port "$MLFLOW_PORT" \
      --serve-artifacts --workers 2 --app-name basic-auth
  )
  wait_http mlflow "http://$HOST:$MLFLOW_PORT/health"
}

start_prefect() {
  (
    cd "$SH/home"
    export PREFECT_SERVER_API_AUTH_STRING="$DB_ROLE:$PREFECT_PASSWORD"
    export HOME="$SH/home" PREFECT_HOME="$SH/prefect" PGPASSFILE="$SH/pgpass" PREFECT_SERVER_ANALYTICS_ENABLED=false
    export PREFECT_SERVER_DATABASE_CONNECTION_URL="postgresql+asyncpg://$DB_ROLE@127.0.0.1:$PG_PORT/prefect"
    export PREFECT_UI_API_URL="http://$HOST:$PREFECT_PORT/api"
    start_component prefect "${AS_SERVICE[@]}" "$BIN/prefect" server start --host "$HOST" --port "$PREFECT_PORT"
  )
  wait_http prefect "http://$HOST:$PREFECT_PORT/api/health"
}

write_client_env() {  # what a shell, a checkout or a worker needs to use the servers
  secret_file "$SH/client.env"
  {
    echo "export MLFLOW_TRACKING_URI=http://$HOST:$MLFLOW_PORT"
    echo "export RINGFLOW_CREDENTIALS_FOR=http://$HOST:$MLFLOW_PORT"  # the credentials below go to no other server
    echo "export PREFECT_API_URL=http://$HOST:$PREFECT_PORT/api"
    echo "export MLFLOW_TRACKING_USERNAME=$DB_ROLE MLFLOW_TRACKING_PASSWORD=$MLFLOW_PASSWORD"
    echo "export PREFECT_API_AUTH_STRING=$DB_ROLE:$PREFECT_PASSWORD"
  } > "$SH/client.env"
}

mirror_checkout() {  # the repository the remote pool's workers pull from: a bare one here, unless named
  if [ -z "${RINGFLOW_REPOSITORY:-}" ]; then
    RINGFLOW_REPOSITORY=$SH/ringflow.git
    [ -d "$RINGFLOW_REPOSITORY" ] || git init -q --bare "$RINGFLOW_REPOSITORY"
    git push -q --force "$RINGFLOW_REPOSITORY" HEAD:refs/heads/main
  fi
  RINGFLOW_COMMIT=$(git rev-parse HEAD)
  export RINGFLOW_REPOSITORY RINGFLOW_COMMIT
  [ -z "$(git status --porcelain --untracked-files=no)" ] \
    || say "the remote pool runs commit ${RINGFLOW_COMMIT:0:12}: this checkout's uncommitted changes are not in it"
}

start_worker() {
  # shellcheck disable=SC1091
  . "$SH/client.env"
  mirror_checkout
  bash scripts/serve.sh deploy > "$LOGS/deploy.log" 2>&1 || fail "prefect deploy failed; see $LOGS/deploy.log"
  if [ ${#AS_WORKER[@]} -gt 0 ]; then
    "${AS_WORKER[@]}" test -w "$ROOT" || fail "the worker's user $WORKER_USER cannot write this checkout ($ROOT)"
  fi
  (
    [ ${#AS_WORKER[@]} -eq 0 ] || HOME=$(getent passwd "$WORKER_USER" | cut -d: -f6)
    start_component worker "${AS_WORKER[@]}" "$BIN/prefect" worker start --pool ringflow-local \
      --name "ringflow-worker-$(hostname)"
  )
}

stop_pid_groups() {  # $1 seconds, then pid files: TERM to all their process groups at once, KILL to those left after
  # $1 seconds in all (each end noted in logs/stop.log)
  local seconds=$1 started=$SECONDS file pid left=() waiting
  shift
  local -A group_of=() nudged=()
  for file in "$@"; do
    [ -f "$file" ] || continue
    pid=$(noted_pid "$file")  # a pid file whose process is gone (or is another's now) is only removed
    if [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null; then left+=("$file"); group_of[$file]=$pid
    else rm -f "$file"; fi
  done
  while [ ${#left[@]} -gt 0 ]; do
    waiting=()
    for file in "${left[@]}"; do
      pid=${group_of[$file]}
      if ! kill -0 -- "-$pid" 2>/dev/null; then
        echo "$(date -Is) $(basename "$file" .pid): stopped in $((SECONDS - started)) s" >> "$LOGS/stop.log"
      elif [ "${file##*/}" = worker.pid ] && [ -z "${nudged[$file]:-}" ] && [ $((SECONDS - started)) -ge 3 ]; then
        # Prefect's worker once a flow run has been: its SIGINT (sent by its own TERM handler) cancels a task that
        # swallows the cancel, and it ran on until killed; its second TERM is Prefect's own SIGKILL of the worker
        # process alone (its flow runs, in its group, keep the rest of the time to end)
        kill -TERM "$pid" 2>/dev/null || true; nudged[$file]=1; waiting+=("$file"); continue
      elif [ $((SECONDS - started)) -ge "$seconds" ]; then
        kill -KILL -- "-$pid" 2>/dev/null || true
        echo "$(date -Is) $(basename "$file" .pid): killed after $seconds s" >> "$LOGS/stop.log"
      else
        waiting+=("$file"); continue
      fi
      rm -f "$file"
    done
    left=("${waiting[@]}")
    [ ${#left[@]} -eq 0 ] || sleep 0.5
  done
}

stop_all() {  # within a minute, as Ctrl-C promises
  # all three at once, 20 s in all: the servers close their connections meanwhile; Prefect's worker gets its second
  # signal after 3 s (see stop_pid_groups)
  stop_pid_groups 20 "$RUN/worker.pid" "$RUN/prefect.pid" "$RUN/mlflow.pid"
  if [ -f "$PGDATA/postmaster.pid" ]; then
    as_db_user "$PG_BIN/pg_ctl" stop -D "$PGDATA" -m fast -w -t 20 > /dev/null 2>&1 || true
  fi
  rm -f "$RUN/services.pid" "$RUN"/*.paused
}

stop_and_exit() {  # $1 exit status: every server stopped, once; a second Ctrl-C meanwhile does not cut the stop short
  trap '' INT TERM
  trap - EXIT
  stop_all
  say "stopped"
  exit "$1"
}

watch_components() {  # until a signal: one line and a stop when a server dies
  local name
  while true; do
    for name in "${COMPONENTS[@]}"; do
      [ -f "$RUN/$name.paused" ] && continue  # stopped on purpose (services.sh stop NAME)
      [ -n "$(noted_pid "$RUN/$name.pid")" ] || fail "the $name process exited; see $LOGS/$name.log"
    done
    sleep 2 & wait $! || true
  done
}

print_ready() {
  local artifacts=${SERVICES_ARTIFACTS:-$SH/mlflow-artifacts}
  echo "MLflow:  http://$HOST:$MLFLOW_PORT  (PostgreSQL database mlflow on 127.0.0.1:$PG_PORT; artifacts in $artifacts)"
  echo "Prefect: http://$HOST:$PREFECT_PORT  (PostgreSQL database prefect; work pool ringflow-local, a worker here)"
  echo "remote pool ringflow-remote: commit ${RINGFLOW_COMMIT:0:12} of $RINGFLOW_REPOSITORY; on another host:" \
    "scripts/remote_worker.sh CLIENT_ENV"
  echo "authentication is on (user $DB_ROLE); the credentials are in $SH/client.env (mode 0600)"
  echo "the servers run as $SERVICE_USER, the worker as $WORKER_USER"
  if on_network; then
    echo "warning: basic authentication over plain HTTP: anyone on the network path to $HOST reads the password;" \
      "put TLS in front (a reverse proxy, docs/team.md)"
  fi
  echo "point a shell at them:  . $SH/client.env"
  echo "run:  $BIN/prefect deployment run 'training-pipeline/train' --param epochs=3 --watch"
  echo "stop: Ctrl-C here, or make services-down"
}

up() {
  [ -x "$BIN/mlflow" ] || fail "no environment in $ROOT/.venv: run make setup"
  PG_BIN=$(pg_bin); DB_USER=$(db_user)
  mkdir -p "$SH" "$RUN" "$LOGS" && chmod 711 "$SH" && chmod 700 "$RUN" "$LOGS"
  choose_users
  write_secrets
  service_files
  init_database_cluster
  refuse_second_start
  refuse_taken_ports
  trap 'stop_and_exit $?' EXIT  # a server died (or up failed)
  trap 'stop_and_exit 130' INT  # Ctrl-C
  trap 'stop_and_exit 0' TERM   # make services-down
  note_pid $$ "$RUN/services.pid"
  start_postgres
  start_mlflow
  start_prefect
  write_client_env
  start_worker
  print_ready
  watch_components
}

running() {  # $1 pid: a process that has not ended (one that ended and waits for its parent to notice has)
  [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

down() {
  PG_BIN=$(pg_bin); DB_USER=$(db_user)
  local pid
  pid=$(noted_pid "$RUN/services.pid")
  if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 180); do running "$pid" || break; sleep 0.5; done
  fi
  stop_all  # whatever a killed `make services` left
  say "stopped"
}

pause() {  # $1 mlflow | prefect, $2 --kill: one server stopped (killed) while the rest runs on, for maintenance
  local pid
  [ -f "$RUN/$1.pid" ] || fail "no $1 server of $SH is running"
  touch "$RUN/$1.paused"
  if [ "${2:-}" = --kill ]; then
    pid=$(noted_pid "$RUN/$1.pid")
    [ -z "$pid" ] || kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$RUN/$1.pid"
  else stop_pid_groups 30 "$RUN/$1.pid"; fi
  say "$1 stopped"
}

resume() {  # $1 mlflow | prefect: started again on the same data, ports and credentials
  [ -f "$RUN/$1.paused" ] || fail "the $1 server of $SH was not stopped with services.sh stop"
  choose_users
  write_secrets
  service_files
  "start_$1"
  rm -f "$RUN/$1.paused"
  say "$1 started"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  stop) [[ "${2:-}" =~ ^(mlflow|prefect)$ ]] || fail "usage: scripts/services.sh stop mlflow|prefect [--kill]"
        pause "$2" "${3:-}" ;;
  start) [[ "${2:-}" =~ ^(mlflow|prefect)$ ]] || fail "usage: scripts/services.sh start mlflow|prefect"
         resume "$2" ;;
  *) fail "usage: scripts/services.sh up | down | stop mlflow|prefect [--kill] | start mlflow|prefect" ;;
esac
