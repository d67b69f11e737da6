#!/usr/bin/env bash
# Start a throwaway single-node SLURM cluster on loopback (Debian 12, Slurm 22.05).
#
#   tests/slurm/start_cluster.sh            # state in $LMCFLOW_SLURM_DIR (default /tmp/lmcflow-slurm)
#   tests/slurm/stop_cluster.sh             # stops exactly the daemons started here
#
# What it does (idempotent, every wait bounded):
#   1. apt-get install slurmctld slurmd slurm-client munge   (skipped when installed)
#   2. creates /etc/munge/munge.key if missing, starts munged as user munge
#      (reuses an already-running munged, which it then never stops)
#   3. writes $STATE/etc/slurm.conf (no accounting, no cgroups, one partition) and
#      symlinks /etc/slurm/slurm.conf to it (refuses if a real slurm.conf is there)
#   4. starts slurmctld and slurmd in the foreground (no systemd), detached with setsid,
#      records their pids in $STATE/pids
#   5. waits until `sinfo` reports the node idle, then smoke-tests srun + sbatch
#
# Environment knobs:
#   LMCFLOW_SLURM_DIR            state dir                      (/tmp/lmcflow-slurm)
#   LMCFLOW_SLURM_IDLE_TIMEOUT   seconds to wait for idle node  (60)
#   LMCFLOW_SLURM_CTLD_PORT      slurmctld port                 (6817)
#   LMCFLOW_SLURM_SLURMD_PORT    slurmd port                    (6818)
#   LMCFLOW_SLURM_SMOKE          1 = run srun/sbatch smoke test (1)
#   LMCFLOW_SLURM_MIN_JOB_AGE    slurm.conf MinJobAge, s        (3600; keep >= 300)
#   LMCFLOW_SLURM_MAX_TIME       the partition's MaxTime, min   (10: a job asking for more is refused by sbatch,
#                                as on a real cluster; tests/test_slurm.py plans with cluster.max_runtime = it)
#
# Exit status: 0 cluster up and idle; non-zero with a message and daemon logs otherwise.
# Needs root (apt, munge key, daemons); re-executes itself with `sudo -n` if possible.
set -euo pipefail

STATE=${LMCFLOW_SLURM_DIR:-/tmp/lmcflow-slurm}
IDLE_TIMEOUT=${LMCFLOW_SLURM_IDLE_TIMEOUT:-60}
CTLD_PORT=${LMCFLOW_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${LMCFLOW_SLURM_SLURMD_PORT:-6818}
SMOKE=${LMCFLOW_SLURM_SMOKE:-1}
MIN_JOB_AGE=${LMCFLOW_SLURM_MIN_JOB_AGE:-3600}
MAX_TIME=${LMCFLOW_SLURM_MAX_TIME:-10}
PARTITION=debug
PACKAGES=(slurmctld slurmd slurm-client munge)

log() { printf '[start_cluster %(%H:%M:%S)T] %s\n' -1 "$*"; }
STARTED=0  # daemon logs are only worth printing once this run started daemons
die() {
    printf '[start_cluster] ERROR: %s\n' "$*" >&2
    ((STARTED)) && dump_logs >&2
    exit 1
}
dump_logs() {
    local f
    for f in "$STATE"/log/*.log "$STATE"/log/*.out /var/log/munge/munged.log; do
        [[ -s $f ]] || continue
        echo "----- $f (last 40 lines, PMIx plugin noise removed) -----"
        grep -v -e pmix -e 'MPI: Cannot create context' "$f" | tail -n 40
    done
}

if [[ $EUID -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        exec sudo -n --preserve-env=LMCFLOW_SLURM_DIR,LMCFLOW_SLURM_IDLE_TIMEOUT,LMCFLOW_SLURM_CTLD_PORT,LMCFLOW_SLURM_SLURMD_PORT,LMCFLOW_SLURM_SMOKE,LMCFLOW_SLURM_MIN_JOB_AGE,LMCFLOW_SLURM_MAX_TIME "$0" "$@"
    fi
    echo "[start_cluster] ERROR: must run as root (or with passwordless sudo)" >&2
    exit 1
fi

T0=$SECONDS
export SLURM_CONF=$STATE/etc/slurm.conf
ETC_CONF=/etc/slurm/slurm.conf

pid_alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
recorded_pid() { awk -v n="$1" '$1 == n {print $2}' "$STATE/pids" 2>/dev/null | tail -n 1; }
node_state() { timeout 10 sinfo -h -N -o '%t' 2>/dev/null | head -n 1; }

# --- 0. already running? -------------------------------------------------------------
if pid_alive "$(recorded_pid slurmctld)" && pid_alive "$(recorded_pid slurmd)" \
    && [[ $(node_state) == idle* || $(node_state) == mix* || $(node_state) == alloc* ]]; then
    log "cluster already running (state dir $STATE); nothing to do"
    exit 0
fi
if [[ -s $STATE/pids ]]; then
    log "stale/partial cluster found in $STATE; stopping it first"
    "$(dirname "$0")/stop_cluster.sh" || true
fi

# The daemons read $STATE/etc/slurm.conf, clients /etc/slurm/slurm.conf (a symlink to
# it, see step 3): never clobber a real cluster's config.
if [[ -e $ETC_CONF || -L $ETC_CONF ]] && [[ ! -L $ETC_CONF \
    || ($(readlink "$ETC_CONF") != "$SLURM_CONF" && -e $ETC_CONF) ]]; then
    die "$ETC_CONF exists and is not a link to $SLURM_CONF; refusing to overwrite a real SLURM config"
fi

# --- 1. packages ---------------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache policy slurmctld 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        timeout 300 apt-get update -q >"/tmp/lmcflow-slurm-apt-update.log" 2>&1 \
            || { cat /tmp/lmcflow-slurm-apt-update.log >&2; die "apt-get update failed"; }
    fi
    # policy-rc.d (docker images) or the absence of systemd keep the services from
    # auto-starting; we start them by hand below either way.
    timeout 600 apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
        >"/tmp/lmcflow-slurm-apt-install.log" 2>&1 \
        || { tail -n 30 /tmp/lmcflow-slurm-apt-install.log >&2; die "apt-get install failed"; }
fi
log "slurm $(slurmctld -V | awk '{print $2}'), munge $(munged -V 2>&1 | awk '{print $1}' | sed 's/munge-//')"

mkdir -p "$STATE"/{etc,log,ctld,spool,run}
: >"$STATE/pids"

# --- 2. munge ------------------------------------------------------------------------
STARTED=1
install -d -o munge -g munge -m 0700 /etc/munge
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge
install -d -o munge -g munge -m 0711 /var/lib/munge
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating /etc/munge/munge.key"
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key

munge_ok() { timeout 5 munge -n 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1; }
if munge_ok; then
    log "munged already running; reusing it (stop_cluster.sh will leave it alone)"
else
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    # setpriv execs (no fork), so $! is munged's own pid.
    setsid setpriv --reuid=munge --regid=munge --init-groups \
        /usr/sbin/munged --foreground \
        >"$STATE/log/munged.out" 2>&1 </dev/null &
    echo "munged $!" >>"$STATE/pids"
    for _ in $(seq 1 50); do munge_ok && break; sleep 0.2; done
    munge_ok || die "munged did not come up within 10 s"
fi

# --- 3. slurm.conf -------------------------------------------------------------------
HOST=$(hostname -s)
NODE_LINE=$(slurmd -C | head -n 1)
[[ $NODE_LINE == NodeName=* ]] || die "unexpected 'slurmd -C' output: $NODE_LINE"
cat >"$SLURM_CONF" <<EOF
# Generated by tests/slurm/start_cluster.sh -- single-node test cluster on loopback.
ClusterName=lmcflow
SlurmctldHost=${HOST}(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmdPort=${SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/spool
SlurmctldPidFile=${STATE}/run/slurmctld.pid
SlurmdPidFile=${STATE}/run/slurmd.pid
SlurmctldLogFile=${STATE}/log/slurmctld.log
SlurmdLogFile=${STATE}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups in containers/VMs without systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# no slurmdbd: sacct has nothing to report -> the snakemake profile polls squeue
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# jobs that do not ask for memory must not grab the whole node
DefMemPerCPU=512
# Finished jobs stay visible to squeue this long. The snakemake profile's squeue status
# check needs >= 180 s (its longest poll interval); the test also reads the final job
# states of a whole multi-minute run afterwards, hence 1 h by default.
MinJobAge=${MIN_JOB_AGE}
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=5
Waittime=0
${NODE_LINE} NodeAddr=127.0.0.1 State=UNKNOWN
# a partition time limit as real clusters have: sbatch refuses a job asking for more ("Requested time limit
# is invalid (missing or exceeds some limit)")
EnforcePartLimits=ALL
PartitionName=${PARTITION} Nodes=${HOST} Default=YES MaxTime=${MAX_TIME} State=UP
EOF
# Clients inside jobs cannot rely on $SLURM_CONF: the slurm-jobstep executor strips all
# SLURM_* variables before its nested `srun`, which then only finds the default
# /etc/slurm/slurm.conf. So point that at our file -- but never clobber a real config.
mkdir -p "$(dirname "$ETC_CONF")"
ln -sfn "$SLURM_CONF" "$ETC_CONF"
log "wrote $SLURM_CONF (linked from $ETC_CONF)"

# --- 4. daemons ----------------------------------------------------------------------
rm -f "$STATE"/run/*.pid
# -D: foreground (we detach with setsid ourselves), -c: clear old job state,
# -i: ignore unreadable state files.
setsid /usr/sbin/slurmctld -D -c -i -f "$SLURM_CONF" \
    >"$STATE/log/slurmctld.out" 2>&1 </dev/null &
echo "slurmctld $!" >>"$STATE/pids"
setsid /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$HOST" \
    >"$STATE/log/slurmd.out" 2>&1 </dev/null &
echo "slurmd $!" >>"$STATE/pids"
log "started slurmctld (pid $(recorded_pid slurmctld)) and slurmd (pid $(recorded_pid slurmd))"

# --- 5. wait for the node ------------------------------------------------------------
deadline=$((SECONDS + IDLE_TIMEOUT))
state=""
while ((SECONDS < deadline)); do
    pid_alive "$(recorded_pid slurmctld)" || die "slurmctld exited during start-up"
    pid_alive "$(recorded_pid slurmd)" || die "slurmd exited during start-up"
    state=$(node_state || true)
    [[ $state == idle* ]] && break
    sleep 0.5
done
[[ $state == idle* ]] || die "node not idle within ${IDLE_TIMEOUT}s (sinfo state: '${state:-no answer}')"
log "node $HOST idle after $((SECONDS - T0)) s"

if [[ $SMOKE == 1 ]]; then
    out=$(timeout 30 srun -N1 -n1 -t 1 hostname 2>&1) || die "srun smoke test failed: $out"
    [[ $out == "$HOST" ]] || die "srun printed '$out', expected '$HOST'"
    out=$(timeout 30 sbatch --wait -o /dev/null -t 1 --wrap 'test -n "$SLURM_JOB_ID"' 2>&1) \
        || die "sbatch --wait smoke test failed: $out"
    log "smoke test ok (srun hostname -> $HOST; $out)"
fi

log "cluster up in $((SECONDS - T0)) s (config: $ETC_CONF -> $SLURM_CONF)"
