#!/usr/bin/env bash
# A one-node Slurm cluster on loopback, for the Slurm executor's tests and benchmark.
#
#   tests/slurm-cluster.sh up DIR [GPUS [CPUS]]   start munged, slurmctld and slurmd with all
#                                                 state in DIR; print SLURM_CONF=DIR/slurm.conf
#                                                 and PATH_PREPEND=<the commands' folder>
#   tests/slurm-cluster.sh down DIR               cancel every job, stop the daemons
#
# The commands come from tests/install-slurm.sh (AORTA_SLURM_BIN, installed packages, or
# Debian's unpacked into .cache/slurm). Ports are free loopback ports picked at start; GPUS fake
# GPUs (default 4) are device nodes made in DIR/dev (copies of /dev/null when mknod is allowed,
# plain files otherwise: Slurm only needs the paths); the node claims CPUS CPUs (default 8,
# whatever the machine has: SlurmdParameters=config_overrides), so a 2-core CI machine can run
# as many one-CPU tasks at once as a test wants. MinJobAge is long, so squeue and scontrol still
# show finished jobs while the submitter polls; JobCompType=jobcomp/filetxt gives `sacct -c`
# the final state of every job without a slurmdbd. Memory is a consumable resource
# (DefMemPerCPU) enforced by jobacct_gather/linux polling every second (OverMemoryKill: no
# cgroups needed), so a task over its --mem is killed; KillWait=1 so a task over its time
# limit is killed a second after its SIGTERM. AORTA_TEST_SLURM_MAX_ARRAY_SIZE sets MaxArraySize
# (a test of arrays split to it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

die() { echo "error: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 up DIR [GPUS [CPUS]] | down DIR"
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

stop_pid() { # stop_pid PIDFILE: TERM, then KILL after 5 s
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

if [ "$cmd" = down ]; then
  bin=$(cat "$dir/bin" 2>/dev/null) || exit 0
  export SLURM_CONF="$dir/slurm.conf"
  # Jobs first: their slurmstepd processes outlive slurmd.
  "$bin/scancel" --full --quiet --user="$(id -un)" 2>/dev/null || true
  for _ in $(seq 50); do
    [ -z "$("$bin/squeue" --noheader --states=PENDING,RUNNING,COMPLETING 2>/dev/null)" ] && break
    sleep 0.1
  done
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munged.pid"
  exit 0
fi
[ "$cmd" = up ] || die "unknown command $cmd (up or down)"
gpus=${3:-4}
cpus=${4:-8}

bin=$("$here/install-slurm.sh" | tail -n 1)
plugins=$(cd "$bin/.plugins" && pwd -P)
echo "$bin" > "$dir/bin"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/dev"
chmod 0700 "$dir/munge"

# Free loopback ports: bound once by the kernel's choice, then released for the daemons.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')

for i in $(seq 0 $((gpus - 1))); do
  f="$dir/dev/gpu$i"
  [ -e "$f" ] || mknod -m 0666 "$f" c 1 3 2>/dev/null || : > "$f"
done

host=$(hostname -s)
cat > "$dir/slurm.conf" <<EOF
ClusterName=aorta
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
PluginDir=$plugins
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=2048
GresTypes=gpu
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
KillWait=1
SchedulerType=sched/builtin
# Batch jobs start at the next scheduling pass (about a second), not up to 3 s later.
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=86400
${AORTA_TEST_SLURM_MAX_ARRAY_SIZE:+MaxArraySize=$AORTA_TEST_SLURM_MAX_ARRAY_SIZE}
# A site's TaskProlog exporting variables into every task: tests write task-prolog.env.
TaskProlog=$dir/task-prolog.sh
SlurmdParameters=config_overrides
NodeName=aorta0 NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=65536 Gres=gpu:$gpus State=UNKNOWN
PartitionName=debug Nodes=aorta0 Default=YES MaxTime=INFINITE State=UP
EOF
printf '#!/bin/sh\ncat %s/task-prolog.env 2>/dev/null\nexit 0\n' "$dir" > "$dir/task-prolog.sh"
chmod +x "$dir/task-prolog.sh"
if [ "$gpus" -gt 0 ]; then
  echo "Name=gpu File=$dir/dev/gpu[0-$((gpus - 1))]" > "$dir/gres.conf"
else
  : > "$dir/gres.conf"
fi

export SLURM_CONF="$dir/slurm.conf"
[ -f "$dir/munge/munge.key" ] || "$bin/mungekey" --create --keyfile="$dir/munge/munge.key" >/dev/null
chmod 0600 "$dir/munge/munge.key"
# --force: munged refuses key and socket folders below world-writable ones (/tmp) otherwise.
"$bin/munged" --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed"
"$bin/slurmctld" -c -i
"$bin/slurmd" -c -N aorta0 -d "$bin/slurmstepd"

# Ready when the node is idle (slurmd registered with slurmctld).
for _ in $(seq 300); do
  state=$("$bin/sinfo" --noheader --nodes=aorta0 --format=%T 2>/dev/null || true)
  if [ "$state" = idle ]; then
    echo "SLURM_CONF=$dir/slurm.conf"
    echo "PATH_PREPEND=$bin"
    exit 0
  fi
  sleep 0.1
done
echo "error: the node did not become idle in 30 s (state: ${state:-none}); logs in $dir:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/munged.log" >&2 2>/dev/null || true
"$0" down "$dir" || true
exit 1
