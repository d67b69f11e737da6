#!/usr/bin/env bash
# Stop the test cluster started by tests/slurm/start_cluster.sh.
#
# Cancels remaining jobs, then stops exactly the daemons whose pids start_cluster.sh
# recorded in $STATE/pids (a munged that was already running is not in that file and
# is left alone), and removes the pid files so the next start is clean.
# Idempotent: safe to call when nothing runs. Every wait is bounded.
set -uo pipefail

STATE=${LMCFLOW_SLURM_DIR:-/tmp/lmcflow-slurm}
export SLURM_CONF=$STATE/etc/slurm.conf

log() { printf '[stop_cluster %(%H:%M:%S)T] %s\n' -1 "$*"; }

if [[ $EUID -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        exec sudo -n --preserve-env=LMCFLOW_SLURM_DIR "$0" "$@"
    fi
    echo "[stop_cluster] ERROR: must run as root (or with passwordless sudo)" >&2
    exit 1
fi

if [[ ! -s $STATE/pids ]]; then
    log "no recorded daemons in $STATE/pids; nothing to stop"
    rm -f "$STATE"/run/slurmctld.pid "$STATE"/run/slurmd.pid
    exit 0
fi

# pid is ours only if it is alive AND still runs the program we started
# (guards against pid reuse after a reboot or a crash).
ours() { [[ -r /proc/$1/comm && $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]]; }

ctld_pid=$(awk '$1 == "slurmctld" {print $2}' "$STATE/pids" | tail -n 1)
if [[ -n $ctld_pid ]] && ours "$ctld_pid" slurmctld; then
    # cancel leftovers so no slurmstepd outlives the cluster
    if [[ -n $(timeout 10 squeue -h -o %i 2>/dev/null) ]]; then
        log "cancelling remaining jobs"
        timeout 10 scancel --full --state=PENDING,RUNNING,SUSPENDED --quiet 2>/dev/null || true
        for _ in $(seq 1 30); do
            [[ -z $(timeout 5 squeue -h -t RUNNING,COMPLETING -o %i 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi
fi

# stop in reverse start order: slurmd, slurmctld, munged
rc=0
for name in slurmd slurmctld munged; do
    pid=$(awk -v n="$name" '$1 == n {print $2}' "$STATE/pids" | tail -n 1)
    [[ -n $pid ]] || continue
    if ! ours "$pid" "$name"; then
        log "$name (pid $pid) not running"
        continue
    fi
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do ours "$pid" "$name" || break; sleep 0.2; done
    if ours "$pid" "$name"; then
        log "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null
        sleep 0.5
        ours "$pid" "$name" && { log "could not stop $name (pid $pid)"; rc=1; continue; }
    fi
    log "stopped $name (pid $pid)"
done

# slurmctld leaves its pid file behind when killed; a stale one confuses the next start
rm -f "$STATE"/run/slurmctld.pid "$STATE"/run/slurmd.pid
if ((rc == 0)); then
    : >"$STATE/pids"
    # remove /etc/slurm/slurm.conf only if it is the symlink start_cluster.sh made
    if [[ -L /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) == "$SLURM_CONF" ]]; then
        rm -f /etc/slurm/slurm.conf
    fi
fi
leftover=$(pgrep -x slurmstepd || true)
[[ -n $leftover ]] && log "warning: slurmstepd processes still present: $leftover"
exit $rc
