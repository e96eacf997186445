#!/usr/bin/env bash
# Install and start a real single-node SLURM cluster on this host (for tests marked `slurm`).
#
# Debian packages munge, slurmctld, slurmd and slurm-client; daemons are started directly (no systemd),
# with a cgroup-free configuration that works in containers: proctrack/linuxproc, task/none,
# no accounting. The node advertises SLURM_CPUS (default 4) CPUs, oversubscribable, so at least two
# one-CPU jobs run at once even on a 2-core machine. Idempotent: a second run reuses what is there and
# only (re)starts daemons that are not running. Exits 0 once `sinfo` shows the node idle, non-zero
# with a one-line reason otherwise. Needs root (apt-get, daemons).
set -euo pipefail

CPUS="${SLURM_CPUS:-4}"
PARTITION="${SLURM_PARTITION:-debug}"
CONF_DIR=/etc/slurm
STATE_DIR=/var/spool/slurmctld
SPOOL_DIR=/var/spool/slurmd
LOG_DIR=/var/log/slurm
WAIT_S="${SLURM_WAIT_S:-60}"

die() { echo "slurm_setup: $*" >&2; exit 1; }
say() { echo "slurm_setup: $*"; }

[ "$(id -u)" = 0 ] || die "needs root (apt-get and the slurm daemons); run it as root or skip the slurm tests"

# ------------------------------------------------------------------------------------------ packages
need=()
for bin in munged slurmctld slurmd sinfo; do
    command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
if [ "${#need[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get to install them"
    say "installing munge slurmctld slurmd slurm-client"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed (no network to the Debian mirror?)"
    apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >/dev/null \
        || die "apt-get install munge slurmctld slurmd slurm-client failed"
fi

# ------------------------------------------------------------------------------------------- munge
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile=/etc/munge/munge.key --force >/dev/null
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
fi
if id munge >/dev/null 2>&1; then
    chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
fi
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
    if id munge >/dev/null 2>&1; then
        runuser -u munge -- munged --force || die "munged did not start (see /var/log/munge/munged.log)"
    else
        munged --force || die "munged did not start (see /var/log/munge/munged.log)"
    fi
fi
for _ in $(seq 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.1
done
munge -n | unmunge >/dev/null 2>&1 || die "munge does not authenticate (munge -n | unmunge fails)"

# -------------------------------------------------------------------------------------- slurm.conf
HOST="$(hostname -s)"
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
mkdir -p "$CONF_DIR" "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR"
conf="$(cat <<EOF
# Written by .ci/slurm_setup.sh: single-node test cluster, no cgroups, no accounting.
ClusterName=saferl-ci
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=${STATE_DIR}
SlurmdSpoolDir=${SPOOL_DIR}
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
Waittime=0
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=${PARTITION} Nodes=${HOST} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
EOF
)"
changed=0
if [ ! -f "$CONF_DIR/slurm.conf" ] || [ "$(cat "$CONF_DIR/slurm.conf")" != "$conf" ]; then
    printf '%s\n' "$conf" > "$CONF_DIR/slurm.conf"
    changed=1
fi

# -------------------------------------------------------------------------------------------- daemons
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop() {
    if running "$1"; then
        kill "$(cat "$1")"
        for _ in $(seq 100); do running "$1" || break; sleep 0.1; done
    fi
}
if [ "$changed" = 1 ]; then
    stop /run/slurmd.pid
    stop /run/slurmctld.pid
fi
if ! running /run/slurmctld.pid; then
    slurmctld || die "slurmctld did not start (see $LOG_DIR/slurmctld.log)"
fi
if ! running /run/slurmd.pid; then
    slurmd || die "slurmd did not start (see $LOG_DIR/slurmd.log)"
fi

# ------------------------------------------------------------------------------------ wait for idle
deadline=$(( $(date +%s) + WAIT_S ))
state=""
while [ "$(date +%s)" -lt "$deadline" ]; do
    state="$(sinfo -h -n "$HOST" -o '%t' 2>/dev/null | head -n1 || true)"
    case "$state" in
        idle|mix|alloc) break ;;
        down*|drain*|drng*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
case "$state" in
    idle|mix|alloc) say "node $HOST is $state in partition $PARTITION ($CPUS CPUs)" ;;
    *) die "node $HOST did not become idle within ${WAIT_S}s (sinfo state: '${state:-none}'; see $LOG_DIR/*.log)" ;;
esac
