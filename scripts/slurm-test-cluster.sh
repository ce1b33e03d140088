#!/usr/bin/env bash
# Throw-away one-node Slurm cluster (Slurm 22.05 + munge, Debian 12) for the
# `executor: slurm` tests.  Everything lives under DIR; nothing is installed.
#   scripts/slurm-test-cluster.sh start DIR   -> prints `export SLURM_CONF=...`
#   scripts/slurm-test-cluster.sh stop  DIR   -> kills what `start DIR` started
# Node: $(hostname -s), feature a2a3, GRES npu:8 split into 4 typed pairs
# g0={0,1} g1={2,3} g2={4,5} g3={6,7}; ask `--gres=npu:gN:2` for a pair.
# A second node, pto-a5 (a second slurmd on this host, -N pto-a5), feature a5,
# with 2 cards of GRES type a5: the separate a5 pool (`--constraint=a5`).
# Exit 77 (= "skip" for ctest) when the daemons are not installed.
# Ports: SLURM_TEST_PORT (default 6817) and +1; one cluster per port pair.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
[[ $cmd == start || $cmd == stop ]] || usage
if [[ $cmd == start ]]; then mkdir -p "$2"; elif [[ ! -d $2 ]]; then exit 0; fi
D=$(cd "$2" && pwd)            # absolute: slurm.conf paths must be absolute
MARK="PTO_SLURM_TEST_CLUSTER=$D" # env tag inherited by daemons/slurmstepd, used by stop
export SLURM_CONF=$D/slurm.conf

# Daemons get reparented to PID 1; if PID 1 reaps lazily (no init) a dead
# daemon lingers as a zombie that still answers `kill -0`, so check /proc state.
alive() { local s; s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [[ ${s%% *} != Z ]]; }

stop_pidfile() {               # TERM, wait up to 10 s, then KILL
  local f=$1 pid i
  [[ -s $f ]] || return 0
  pid=$(<"$f")
  if alive "$pid" && kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 100; i++)); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

if [[ $cmd == stop ]]; then
  # Cancel jobs first so slurmstepd kills their processes (slurmd does not).
  if [[ -s $D/run/slurmctld.pid ]] && alive "$(<"$D/run/slurmctld.pid")"; then
    timeout 5 scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null || true) ]] && break; sleep 0.1
    done
  fi
  for f in "$D"/run/slurmd-*.pid; do stop_pidfile "$f"; done
  stop_pidfile "$D/run/slurmctld.pid"
  stop_pidfile "$D/munge/munged.pid"
  # Sweep leftovers (slurmstepd, daemons whose pid file was lost) by env tag.
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}; p=${p%/environ}
    [[ $p == "$$" ]] && continue
    if grep -qzxF "$MARK" "$e" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; fi
  done
  exit 0
fi

for b in munged slurmctld slurmd sinfo srun; do
  command -v "$b" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
  if ! command -v "$b" >/dev/null; then
    echo "slurm-test-cluster: '$b' not found; install: apt-get install -y --no-install-recommends slurm-wlm munge" >&2
    exit 77
  fi
done

if [[ -s $D/run/slurmctld.pid ]] && alive "$(<"$D/run/slurmctld.pid")"; then
  echo "slurm-test-cluster: already running in $D (run: $0 stop $D)" >&2; exit 1
fi
H=$(hostname -s)
PORT=${SLURM_TEST_PORT:-6817}
# Slots for 8 one-card steps at once whatever the machine (config_overrides keeps the configured count).
CPUS=$(( $(nproc) < 16 ? 16 : $(nproc) ))
# RealMemory above the real value drains the node ("Low RealMemory"): use 90%.
MEM=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
mkdir -p "$D"/{munge,state,spool,log,run,dev}
chmod 0755 "$D"  # munged: every directory above its socket searchable by all (whatever the umask)
chmod 0755 "$D/munge"  # munged: socket dir needs a+x, key dir must not be g/o-writable
for i in 0 1 2 3 4 5 6 7; do : >"$D/dev/npu$i"; done   # stand-ins for /dev/davinci*
for i in 0 1; do : >"$D/dev/a5npu$i"; done

[[ -s $D/munge/munge.key ]] || { dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none; }
chmod 0400 "$D/munge/munge.key"  # munged rejects a key readable by others

# Node addressed as 127.0.0.1 so nothing depends on how $H resolves.
cat >"$D/slurm.conf" <<EOF
ClusterName=ptotest
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Clients and daemons all reach our private munged through this socket.
AuthInfo=socket=$D/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
# sbatch jobs otherwise wait up to 3 s for the scheduler; backfill every 1 s.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
# Keep configured CPUs/memory even if the machine reports other topology.
SlurmdParameters=config_overrides
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
GresTypes=npu
NodeName=$H NodeAddr=127.0.0.1 Port=$((PORT + 1)) CPUs=$CPUS RealMemory=$((MEM / 2)) Features=a2a3 Gres=npu:g0:2,npu:g1:2,npu:g2:2,npu:g3:2 State=UNKNOWN
NodeName=pto-a5 NodeHostname=$H NodeAddr=127.0.0.1 Port=$((PORT + 2)) CPUs=$CPUS RealMemory=$((MEM / 2)) Features=a5 Gres=npu:a5:2 State=UNKNOWN
PartitionName=npu Nodes=$H,pto-a5 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF

# One type per card pair: a `--gres=npu:gN:2` job always gets a whole pair.
cat >"$D/gres.conf" <<EOF
NodeName=$H Name=npu Type=g0 File=$D/dev/npu[0-1]
NodeName=$H Name=npu Type=g1 File=$D/dev/npu[2-3]
NodeName=$H Name=npu Type=g2 File=$D/dev/npu[4-5]
NodeName=$H Name=npu Type=g3 File=$D/dev/npu[6-7]
NodeName=pto-a5 Name=npu Type=a5 File=$D/dev/a5npu[0-1]
EOF

t0=$(date +%s.%N)
export PTO_SLURM_TEST_CLUSTER=$D   # = $MARK
munged --key-file="$D/munge/munge.key" --socket="$D/munge/munge.socket" \
       --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
       --seed-file="$D/munge/munged.seed"
slurmctld -f "$D/slurm.conf"
slurmd -f "$D/slurm.conf" -N "$H"
slurmd -f "$D/slurm.conf" -N pto-a5

# Wait (<= 30 s) for both nodes to register idle.
for ((i = 0; i < 300; i++)); do
  st=$(sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true)
  [[ $st == "idle " ]] && break
  sleep 0.1
done
if [[ $st != "idle " ]]; then
  echo "slurm-test-cluster: nodes not idle after 30 s (states '$st'); see $D/log" >&2
  tail -n 20 "$D"/log/*.log >&2 || true
  exit 1
fi
echo "# cluster up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s" >&2
echo "export SLURM_CONF=$D/slurm.conf"
