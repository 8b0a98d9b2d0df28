#!/usr/bin/env bash
# A test cluster on this machine: N hosts h1..hN, each a network namespace with its own hostname (a UTS namespace),
# an address on a bridge (10.77.0.11, .12, ...; this machine, the head node, is 10.77.0.1) and an sshd that takes
# a generated key. RINGFLOW_TESTCLUSTER=g makes a second cluster beside it, hosts g1..gN on 10.77.1.0/24, with
# names, links and state of its own (the test suite runs its cluster tests on both at once); h is the default; f
# (10.77.2.0/24) is the script's own test's, beside the other two. The filesystem is shared, unless `--private`: then each host also has its own mount namespace in
# which this checkout's data/, outputs/ and mlruns/ and /tmp are empty directories of its own (a host with its own
# disk: the code and .venv stay visible at the same path, as if installed there alike). With `--slurm`, the hosts
# are also the nodes of a Slurm cluster whose controller runs on this machine (scripts/testcluster_slurm.sh). Root
# only. Only cluster h can have Slurm (one slurm.conf per machine).
#
#   scripts/testcluster.sh up [N] [--private | --slurm]    make the hosts (2 by default); prints their names
#   scripts/testcluster.sh down      stop every sshd and process of the hosts and remove them
#   scripts/testcluster.sh status    the hosts that are up
#
# `up` adds the names to /etc/hosts and a block to ~/.ssh/config (each host's address, key, no host-key prompts);
# `down` removes both. RINGFLOW_TESTCLUSTER_HOSTS_FILE and RINGFLOW_TESTCLUSTER_SSH_CONFIG name other files (the
# script's own tests edit files of their own, not the ones the other clusters' tests use meanwhile).
set -euo pipefail

CLUSTER="${RINGFLOW_TESTCLUSTER:-h}"  # the hosts' letter
case "$CLUSTER" in  # h keeps the names it always had
  h) NET=0 STATE="/run/ringflow-testcluster" MARK="# ringflow test cluster" ;;
  g|f) NET=$([ "$CLUSTER" = g ] && echo 1 || echo 2) STATE="/run/ringflow-testcluster-$CLUSTER"
       MARK="# ringflow test cluster $CLUSTER" ;;
  *) echo "testcluster: RINGFLOW_TESTCLUSTER is h, g or f, not $CLUSTER" >&2; exit 1 ;;
esac
PREFIX="rf-$CLUSTER"
BRIDGE="rfbr$NET"
LINK_PREFIX="rfv$CLUSTER"  # this machine's end of each host's link: rfvh1, ...
SUBNET="10.77.$NET"
LOCK="/run/ringflow-testcluster.lock"  # /etc/hosts and ~/.ssh/config are edited by one cluster at a time
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PRIVATE_DIRS=(data outputs mlruns)  # of the checkout, hidden from a --private host
SSH_CONFIG="${RINGFLOW_TESTCLUSTER_SSH_CONFIG:-$HOME/.ssh/config}"
HOSTS_FILE="${RINGFLOW_TESTCLUSTER_HOSTS_FILE:-/etc/hosts}"
# shellcheck source=scripts/testcluster_slurm.sh
source "$CHECKOUT/scripts/testcluster_slurm.sh"

die() { echo "testcluster: $*" >&2; exit 1; }

hosts_up() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX[0-9]" | sed "s/^$PREFIX/$CLUSTER/" | sort -V || true
}

replace_file() {  # $1: file, $2: its new content in a temporary file beside it; renamed into place, or copied
  # over it where the file is a mount point (/etc/hosts in a container), never truncated before the copy is whole
  chmod --reference="$1" "$2" 2>/dev/null || true
  mv -f "$2" "$1" 2>/dev/null || { cat "$2" > "$1" && rm -f "$2"; }
}

remove_marked() {  # remove the lines between our markers from a file
  [ -f "$1" ] || return 0
  local new="$1.ringflow-testcluster.$$"
  ( flock 9
    sed "/^$MARK begin\$/,/^$MARK end\$/d" "$1" > "$new"
    replace_file "$1" "$new" ) 9>"$LOCK"
}

append_block() {  # $1: file; appends standard input as a block between our markers, on lines of its own
  local new="$1.ringflow-testcluster.$$" block
  block="$(cat)"
  ( flock 9
    { if [ -s "$1" ]; then cat "$1"; [ -z "$(tail -c 1 "$1")" ] || echo; fi  # end the file's last line first
      echo "$MARK begin"; echo "$block"; echo "$MARK end"; } > "$new"
    [ -e "$1" ] || : > "$1"
    replace_file "$1" "$new" ) 9>"$LOCK"
}

make_bridge() {
  ip link show "$BRIDGE" >/dev/null 2>&1 && return
  ip link add "$BRIDGE" type bridge
  ip addr add "$SUBNET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

private_view() {  # $1: the host's state dir; prints the commands that give it its own data, outputs, mlruns, /tmp
  local dir="$1" name
  # a /tmp of its own; the checkout (which may itself lie in /tmp) held aside and put back at its path
  mkdir -p "$dir/checkout"
  printf 'mount --rbind %q %q && mount -t tmpfs tmpfs /tmp && ' "$CHECKOUT" "$dir/checkout"
  printf 'mkdir -p %q && mount --rbind %q %q && ' "$CHECKOUT" "$dir/checkout" "$CHECKOUT"
  for name in "${PRIVATE_DIRS[@]}"; do
    mkdir -p "$dir/disk/$name" "$CHECKOUT/$name"
    printf 'mount --bind %q %q && ' "$dir/disk/$name" "$CHECKOUT/$name"
  done
}

make_host() {  # $1: index, $2: 1 for a private filesystem view
  local index="$1" private="$2" name="$CLUSTER$1" ns="$PREFIX$1" address="$SUBNET.$((10 + $1))"
  local dir="$STATE/$CLUSTER$1"
  ip netns add "$ns"
  ip link add "$LINK_PREFIX$index" type veth peer name eth0 netns "$ns"
  ip link set "$LINK_PREFIX$index" master "$BRIDGE" up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$SUBNET.1"
  mkdir -p "$dir"
  ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key" <<<y >/dev/null
  cat > "$dir/sshd_config" <<EOF
ListenAddress $address
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $STATE/client_key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
MaxSessions 100
AcceptEnv *
EOF
  # sshd in its own UTS namespace with its own hostname (and with --private its own mounts): every ssh session on
  # the host inherits them.
  local namespaces=(--uts) mounts=""
  if [ "$private" = 1 ]; then namespaces+=(--mount --propagation private); mounts="$(private_view "$dir")"; fi
  ip netns exec "$ns" unshare "${namespaces[@]}" sh -c \
    "${mounts}hostname $name && exec /usr/sbin/sshd -f $dir/sshd_config -E $dir/sshd.log"
  echo "$address $name" >> "$STATE/hosts"
}

write_client_config() {
  append_block "$HOSTS_FILE" < "$STATE/hosts"
  mkdir -p "$(dirname "$SSH_CONFIG")" && chmod 700 "$(dirname "$SSH_CONFIG")"
  append_block "$SSH_CONFIG" <<EOF
$(awk '{printf "Host %s\n  HostName %s\n", $2, $1}' "$STATE/hosts")
Host $(awk '{print $2}' "$STATE/hosts" | tr '\n' ' ')
  IdentityFile $STATE/client_key
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF
}

wait_for_ssh() {  # $1: host name
  for _ in $(seq 50); do
    ssh -F "$SSH_CONFIG" -o BatchMode=yes -o ConnectTimeout=2 "$1" true 2>/dev/null && return
    sleep 0.2
  done
  die "$1 does not answer ssh (see $STATE/$1/sshd.log)"
}

up() {  # [N] [--private | --slurm], in any order
  local count=2 private=0 slurm=0 arg
  for arg in "$@"; do
    case "$arg" in
      --private) private=1 ;;
      --slurm) slurm=1 ;;
      *[!0-9]*|"") die "up: unknown argument $arg" ;;
      *) count="$arg" ;;
    esac
  done
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
  [ "$private$slurm" != 11 ] || die "up: --slurm needs the shared filesystem (a Slurm job's files), not --private"
  [ "$slurm" = 0 ] || [ "$CLUSTER" = h ] || die "up: --slurm is cluster h's (one slurm.conf per machine)"
  [ -x /usr/sbin/sshd ] || die "sshd is missing: apt-get install openssh-server (make setup installs it)"
  [ -z "$(hosts_up)" ] || die "already up: $(hosts_up | tr '\n' ' ')(scripts/testcluster.sh down first)"
  trap 'code=$?; [ "$code" = 0 ] || { echo "testcluster: up failed; undoing what it made" >&2; down; }' EXIT
  mkdir -p "$STATE" /run/sshd && : > "$STATE/hosts"
  ssh-keygen -q -t ed25519 -N "" -f "$STATE/client_key" <<<y >/dev/null
  make_bridge
  for index in $(seq "$count"); do make_host "$index" "$private"; done
  write_client_config
  for index in $(seq "$count"); do wait_for_ssh "$CLUSTER$index"; done
  [ "$slurm" = 0 ] || slurm_up "$count"
  trap - EXIT
  hosts_up | tr '\n' ' ' && echo
}

down() {
  local ns pid link
  [ "$CLUSTER" != h ] || slurm_down
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX[0-9]" || true); do
    for pid in $(ip netns pids "$ns"); do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns")" ] && break; sleep 0.1; done
    ip netns delete "$ns"
  done
  # A namespace is freed once its last process is gone: remove our ends of the links now, not then.
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 \
                | grep "^$LINK_PREFIX[0-9]" || true); do
    ip link delete "$link" 2>/dev/null || true
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  remove_marked "$HOSTS_FILE"
  remove_marked "$SSH_CONFIG"
  rm -rf "$STATE"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  status) hosts_up ;;
  *) die "usage: scripts/testcluster.sh up [N] [--private | --slurm] | down | status" ;;
esac
