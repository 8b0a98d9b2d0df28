# The test cluster's Slurm (sourced by scripts/testcluster.sh for `up N --slurm`): slurmctld on this machine, the
# head node; one slurmd on each host h1..hN in the host's network and UTS namespaces (its own address and hostname,
# this machine's files), a `debug` partition of the hosts. munge authenticates: one munged per host with one shared
# key, since a munged refuses a credential it has decoded once and a job's step credential reaches every node.
# Plugins need no cgroup delegation (proctrack/linuxproc, task/none); a requeued job may start again 11 s after
# (AuthInfo cred_expire=10) and the scheduler looks every second. /etc/slurm/slurm.conf is written when absent
# (so sinfo, sbatch and ringflow find the cluster as on a real head node) and removed by `down`.

SLURM_DIR="$STATE/slurm"
SLURM_CONF_FILE="/etc/slurm/slurm.conf"
SLURM_CONF_MARK="# written by ringflow's scripts/testcluster.sh"

slurm_conf() {  # $1: the host whose munged the daemons and clients there use (head, h1, ...), $2: the host count
  local index
  cat <<CONF
$SLURM_CONF_MARK (removed by its down)
ClusterName=ringflow-test
SlurmctldHost=$(hostname -s)($SUBNET.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge/$1/munge.socket.2,cred_expire=10
DebugFlags=NO_CONF_HASH
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/run/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log
TmpFS=$SLURM_DIR/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=10
KillWait=5
MinJobAge=600
JobRequeue=1
CONF
  for index in $(seq "$2"); do
    echo "NodeName=h$index NodeAddr=$SUBNET.$((10 + index)) CPUs=2 RealMemory=2000 State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=$(seq -s, -f 'h%g' "$2") Default=YES MaxTime=INFINITE State=UP"
}

make_munge_key() {  # the hosts' shared key: readable by munge alone, from its first byte (made under umask 077)
  rm -f "$SLURM_DIR/munge.key"
  (umask 077 && head -c 1024 /dev/urandom > "$SLURM_DIR/munge.key")
  chown munge:munge "$SLURM_DIR/munge.key" && chmod 0400 "$SLURM_DIR/munge.key"
}

start_munged() {  # $1: host name (head, h1, ...); then the command that enters its namespaces (none for head)
  local name="$1"; shift
  mkdir -p "$SLURM_DIR/munge/$name" && chown munge:munge "$SLURM_DIR/munge/$name"
  "$@" runuser -u munge -- /usr/sbin/munged --socket="$SLURM_DIR/munge/$name/munge.socket.2" \
    --key-file="$SLURM_DIR/munge.key" --pid-file="$SLURM_DIR/munge/$name/munged.pid" \
    --seed-file="$SLURM_DIR/munge/$name/munged.seed" --log-file="$SLURM_DIR/log/munged-$name.log"
}

slurm_up() {  # $1: the host count; after the hosts are up
  local count="$1" index pid
  for tool in slurmctld slurmd sbatch munged; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] \
      || die "$tool is missing: apt-get install slurmctld slurmd slurm-client munge (make setup installs them)"
  done
  if [ -e "$SLURM_CONF_FILE" ] && ! grep -q "^$SLURM_CONF_MARK" "$SLURM_CONF_FILE"; then
    die "$SLURM_CONF_FILE exists and is not the test cluster's: this machine already has a Slurm"
  fi
  mkdir -p "$SLURM_DIR"/{state,log,run,spool} "$SLURM_DIR/munge"
  chown munge:munge "$SLURM_DIR/log"
  make_munge_key
  for name in head $(seq -f 'h%g' "$count"); do
    mkdir -p "$SLURM_DIR/etc/$name" "$SLURM_DIR/tmp/$name"
    slurm_conf "$name" "$count" > "$SLURM_DIR/etc/$name/slurm.conf"
  done
  mkdir -p "$(dirname "$SLURM_CONF_FILE")" && cp "$SLURM_DIR/etc/head/slurm.conf" "$SLURM_CONF_FILE"
  start_munged head
  slurmctld -i -f "$SLURM_DIR/etc/head/slurm.conf"
  for index in $(seq "$count"); do
    # the host's network and hostname, this machine's mounts (a host's own mounts remount /sys without cgroups)
    pid="$(cat "$STATE/h$index/sshd.pid")"
    mkdir -p "$SLURM_DIR/tmp/h$index"
    start_munged "h$index" nsenter --target "$pid" --net --uts
    nsenter --target "$pid" --net --uts slurmd -f "$SLURM_DIR/etc/h$index/slurm.conf"
  done
  wait_for_nodes "$count"
}

wait_for_nodes() {  # $1: the host count; every node idle in the debug partition
  local idle
  for _ in $(seq 100); do
    idle="$(sinfo -h -p debug -t idle -o '%D' 2>/dev/null | head -n 1)"
    [ "${idle:-0}" = "$1" ] && return
    sleep 0.2
  done
  die "the Slurm nodes did not come up (sinfo: $(sinfo -h -o '%T %N' 2>&1 | tr '\n' ' '); see $SLURM_DIR/log)"
}

names_slurm_dir() {  # $1: a pid; whether that process is one of ours (its command line names our files)
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' < "/proc/$1/cmdline" | grep -qF "$SLURM_DIR/"
}

slurm_down() {  # the daemons by their pid files, each only if it is still ours (those on the hosts go with them)
  local pid_file pid
  for pid_file in "$SLURM_DIR"/run/*.pid "$SLURM_DIR"/munge/*/munged.pid; do
    [ -f "$pid_file" ] || continue
    pid="$(cat "$pid_file")"
    names_slurm_dir "$pid" && kill -KILL "$pid" 2>/dev/null
  done
  [ -f "$SLURM_CONF_FILE" ] && grep -q "^$SLURM_CONF_MARK" "$SLURM_CONF_FILE" && rm -f "$SLURM_CONF_FILE"
  return 0
}
