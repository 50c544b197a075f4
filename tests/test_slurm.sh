#!/usr/bin/env bash
# test_slurm.sh: the cluster launch under a real Slurm, where tests/test_scripts.sh only
# dry-runs it. Starts a single-node Slurm on this machine (munged, slurmctld and slurmd
# with a generated slurm.conf; ports, key, state and logs in a temp dir, nothing
# system-wide; stopped on exit), then checks:
#   1. srun --mpi=pmix -n 4 of a TP 2 x PP 2 layout: every step's loss and gradient norm
#      equal the same run under mpirun -np 4, bit for bit;
#   2. srun -n 4 without a PMI plugin (--mpi=none): refused with one error, not 4 lone runs;
#   3. srun -n 4 with -layout auto: world and ranks per node from Slurm ("1 nodes x 4"), and
#      the step's ranks per node win over the job's stale SLURM_NTASKS_PER_NODE;
#   4. a --requeue batch job (scripts/lib.sh's loop) stopped twice: by scancel --signal=TERM
#      (the trainer saves and exits 4, the loop resumes in the job) and by scontrol requeue
#      (Slurm's SIGTERM, the job runs again and resumes): each continues from its checkpoint,
#      no step twice, every step as in the uninterrupted run;
#   5. sbatch of scripts/run_family.sh with its own #SBATCH header (the node is declared
#      with 128 CPUs and 8 stand-in GPUs to take it), shrunk by a sed copy to the tiny
#      model and the CPU trainer: the job completes, exit 0.
# ~35 s on 2 cores. One line per check, then "N passed, M failed"; exit 1 if any failed.
# Needs root (slurmd starts job steps as their owner) and dev/install.sh's slurmctld,
# slurmd, slurm-client and munge: a missing one FAILS. Not root, or a daemon refused by
# the kernel or sandbox (EPERM in its log), prints "SKIPPED (reason)" and exits 0
# (doc/usage.md "Recipe scripts").
#
#   bash tests/test_slurm.sh          # needs ./train_gpt (make train_gpt) and dev/data/kjv (make data)
#   KEEP=1 bash tests/test_slurm.sh   # keep the temp dir (slurm.conf, daemon and job logs)
# shellcheck disable=SC2317  # functions that wait_for and the traps call
set -uo pipefail
case "${1:-}" in
  "") ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "test_slurm.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
pass=0; fail=0
ok()  { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && [ -r "$2" ] && sed 's/^/    | /' "$2" | tail -n 8; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
skip() { echo "test_slurm.sh: SKIPPED ($1)"; finish; } # exit 0 unless a check before it failed

# a Slurm job (or MPI launch) around this test must not leak into the private cluster's clients
# and ranks; SRUN_MPI too, the scripts' plugin choice
for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_|PMIX_|PMI_|OMPI_COMM_WORLD_)'); do unset "$v"; done

# ---- what needs no daemons ---------------------------------------------------------------
for f in ./train_gpt dev/data/kjv/kjv_train_000.bin; do
  [ -e "$f" ] || { bad "setup: $f is missing: make train_gpt data"; finish; }
done
TINY=(-seq 32 -V 8192 -gb 4 -ramp off -threads 1) # tests/attack/lib.sh's: ~0.1 s a step
# -layout auto inside a job of --ntasks-per-node=8 whose step runs 2 per node: the step's count
log=$(SLURM_STEP_TASKS_PER_NODE=2 SLURM_TASKS_PER_NODE=2 SLURM_NTASKS_PER_NODE=8 \
  ./train_gpt -check -world 4 -layout auto "${TINY[@]}" 2>&1)
if grep -q "^layout auto: .*; 2 nodes x 2 " <<< "$log"; then
  ok "-layout auto takes the step's ranks per node (SLURM_STEP_TASKS_PER_NODE), not the job's"
else bad "-layout auto: ranks per node: $(grep -m1 '^layout auto:' <<< "$log")"; fi

missing=""
for b in munged munge slurmctld slurmd srun sbatch squeue scontrol scancel sinfo mpirun; do
  command -v "$b" > /dev/null || missing+=" $b"
done
[ -z "$missing" ] || { bad "setup: missing$missing: run dev/install.sh (slurmctld slurmd slurm-client munge)"; finish; }
[ "$(id -u)" -eq 0 ] || skip "not root (uid $(id -u)): slurmd starts job steps as their owner and must run as root"

# ---- the cluster -------------------------------------------------------------------------
TMP="$(mktemp -d "${TMPDIR:-/tmp}/test_slurm.XXXXXX")"
chmod 755 "$TMP"  # munged wants every directory above its socket searchable by all
MUNGE_PID=""; CTLD_PID=""; SLURMD_PID=""
export SLURM_CONF="$TMP/slurm.conf"
stop_pid() { # TERM, up to 5 s, then KILL: only the daemons this script started
  [ -n "$1" ] && kill -0 "$1" 2> /dev/null || return 0
  kill "$1" 2> /dev/null
  for _ in $(seq 25); do kill -0 "$1" 2> /dev/null || return 0; sleep 0.2; done
  kill -9 "$1" 2> /dev/null
}
cleanup() {
  trap - EXIT INT TERM
  # jobs first: a step's slurmstepd outlives slurmd, and only the controller can end it
  if [ -n "$CTLD_PID" ] && kill -0 "$CTLD_PID" 2> /dev/null; then
    ids=$(timeout 5 squeue -h -o %A 2> /dev/null)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086  # a list of job ids
      timeout 5 scancel $ids 2> /dev/null
      for _ in $(seq 50); do [ -z "$(timeout 5 squeue -h -o %A 2> /dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  stop_pid "$SLURMD_PID"; stop_pid "$CTLD_PID"; stop_pid "$MUNGE_PID"
  if [ "${KEEP:-0}" = "1" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# wait_for SECONDS CMD...: until CMD succeeds; status 1 at the deadline (no wait is unbounded)
wait_for() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.2; done
}
last_error() { grep -hiE "error|fatal|refus|denied|not permitted" "$@" 2> /dev/null | tail -n 1 | cut -c1-160; }
# daemon_failed NAME LOG...: a daemon that did not come up. SKIPPED when the kernel or sandbox
# refused it a system call (EPERM: an environment limit), else FAIL with its own last error line
daemon_failed() {
  local name=$1 why; shift
  why=$(last_error "$@")
  case "$why" in *"Operation not permitted"*) skip "$name cannot run here: $why" ;; esac
  bad "setup: $name did not start: ${why:-no error logged}"; finish
}

mkdir -p "$TMP/munge" "$TMP/state" "$TMP/spool" "$TMP/jobs" && chmod 755 "$TMP/munge"
head -c 1024 /dev/urandom > "$TMP/munge/munge.key" && chmod 400 "$TMP/munge/munge.key"
munged -F --socket="$TMP/munge/socket" --key-file="$TMP/munge/munge.key" --pid-file="$TMP/munge/munged.pid" \
  --seed-file="$TMP/munge/seed" --log-file="$TMP/munge/munged.log" > "$TMP/munged.out" 2>&1 &
MUNGE_PID=$!
wait_for 10 test -S "$TMP/munge/socket" || daemon_failed munged "$TMP/munge/munged.log" "$TMP/munged.out"

HOST=$(hostname -s)
# two free ports (another Slurm, or another copy of this test, may be listening on 6817)
read -r CTLD_PORT SLURMD_PORT < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cat > "$SLURM_CONF" << EOF
# generated by tests/test_slurm.sh: one node on localhost, everything under $TMP
ClusterName=llmctest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$TMP/munge/socket
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
MailProg=/bin/true
# no cgroups (containers seldom allow them): processes tracked through /proc, no binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# the scripts pass --mpi=pmix themselves; none here proves it (and check 2 needs none)
MpiDefault=none
# the node declares what run_family.sh's header asks for, not what the machine has
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
# the trainer's SIGTERM save has this long before SIGKILL
KillWait=10
# a finished job stays visible to scontrol (its exit code) this long; there is no slurmdbd
MinJobAge=300
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=128 Sockets=1 CoresPerSocket=128 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:8
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# Slurm drops a GPU without a device file: eight links to /dev/null stand in for them
mkdir -p "$TMP/dev" && for i in 0 1 2 3 4 5 6 7; do ln -s /dev/null "$TMP/dev/gpu$i"; done
echo "NodeName=$HOST Name=gpu File=$TMP/dev/gpu[0-7]" > "$TMP/gres.conf"

slurmctld -D -f "$SLURM_CONF" > "$TMP/slurmctld.out" 2>&1 &
CTLD_PID=$!
slurmd -D -N "$HOST" -f "$SLURM_CONF" > "$TMP/slurmd.out" 2>&1 & # -N: the name slurm.conf gives it
SLURMD_PID=$!
node_idle() {
  kill -0 "$CTLD_PID" 2> /dev/null || daemon_failed slurmctld "$TMP/slurmctld.out" "$TMP/slurmctld.log"
  kill -0 "$SLURMD_PID" 2> /dev/null || daemon_failed slurmd "$TMP/slurmd.out" "$TMP/slurmd.log"
  [ "$(sinfo -h -N -n "$HOST" -o %T 2> /dev/null)" = "idle" ]
}
if wait_for 30 node_idle; then ok "a Slurm of one node ($HOST, 128 CPUs, 8 GPUs declared) is up, node idle"
else
  bad "setup: node $HOST not idle after 30 s: $(sinfo -h -N -o '%T %E' 2>&1 | head -n 1);" \
    "$(last_error "$TMP/slurmctld.out" "$TMP/slurmd.out")"
  finish
fi

# srun gives Open MPI no slot count, so it does not know 4-8 ranks share 2 cores: busy-polling
# ranks starve each other (1.6 s a step instead of 0.09 s). Yielding when idle, as mpirun
# --oversubscribe does by itself.
export OMPI_MCA_mpi_yield_when_idle=1
# train_rows LOG: "step loss gnorm" of every training step in a JSONL log (%.9g: the float exactly)
train_rows() {
  python3 -c 'import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if r.get("type") == "train": print(r["step"], r["loss"], r["gnorm"])' "$1" 2> /dev/null
}
STEPS=40

# ---- 1. srun --mpi=pmix vs mpirun, TP 2 x PP 2 -------------------------------------------
timeout -k 5 60 mpirun --oversubscribe --allow-run-as-root -np 4 ./train_gpt "${TINY[@]}" -tp 2 -pp 2 \
  -steps "$STEPS" -o "$TMP/ref" > "$TMP/ref.out" 2>&1
train_rows "$TMP/ref/log.jsonl" > "$TMP/ref.rows"
timeout -k 5 60 srun --mpi=pmix -n 4 ./train_gpt "${TINY[@]}" -tp 2 -pp 2 -steps "$STEPS" -o "$TMP/srun" \
  > "$TMP/srun.out" 2>&1
rc=$?
train_rows "$TMP/srun/log.jsonl" > "$TMP/srun.rows"
if [ "$(wc -l < "$TMP/ref.rows")" -ne "$STEPS" ]; then bad "mpirun -np 4 reference: not $STEPS steps" "$TMP/ref.out"
elif [ "$rc" -ne 0 ] || ! grep -q "tp=2 pp=2 dp=1 world=4" "$TMP/srun.out"; then
  bad "srun --mpi=pmix -n 4 -tp 2 -pp 2: exit $rc" "$TMP/srun.out"
elif cmp -s "$TMP/ref.rows" "$TMP/srun.rows"; then
  ok "srun --mpi=pmix -n 4 -tp 2 -pp 2: $STEPS steps, losses and grad norms = mpirun -np 4's, bit for bit"
else bad "srun --mpi=pmix -n 4: losses differ from mpirun's" <(diff "$TMP/ref.rows" "$TMP/srun.rows"); fi

# ---- 2. srun without PMI: every task would be a lone rank 0 ------------------------------
timeout -k 5 60 srun --mpi=none -n 4 ./train_gpt "${TINY[@]}" -tp 1 -pp 1 -steps 2 \
  > "$TMP/nopmi.out" 2> "$TMP/nopmi.err"
rc=$?
if [ "$rc" -ne 0 ] && grep -q "^error: srun started 4 tasks, but this process is not a rank" "$TMP/nopmi.err" &&
  ! grep -q "^step" "$TMP/nopmi.out"; then
  ok "srun --mpi=none -n 4: refused before training ($(grep -m1 -o 'launch with srun --mpi=pmix' "$TMP/nopmi.err"))"
else bad "srun --mpi=none -n 4: exit $rc, not refused" "$TMP/nopmi.err"; fi

# ---- 3. -layout auto under srun ------------------------------------------------------------
timeout -k 5 60 srun --mpi=pmix -n 4 ./train_gpt "${TINY[@]}" -layout auto -steps 2 -o "$TMP/auto" \
  > "$TMP/auto.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^layout auto: .*; 1 nodes x 4 " "$TMP/auto.out" && grep -q "world=4" "$TMP/auto.out" &&
  grep -q "^step      2 " "$TMP/auto.out"; then
  ok "srun --mpi=pmix -n 4 -layout auto: $(grep -m1 -o '^layout auto: -tp [0-9]* -pp [0-9]* -dp [0-9]*' \
    "$TMP/auto.out"), 1 nodes x 4 ranks from Slurm, 2 steps"
else bad "srun -n 4 -layout auto: exit $rc, or not 1 node x 4" "$TMP/auto.out"; fi

# ---- 4. a --requeue job: scancel --signal=TERM, scontrol requeue -----------------------
cat > "$TMP/jobs/requeue.sh" << EOF
#!/usr/bin/env bash
#SBATCH --requeue
#SBATCH --ntasks=4
#SBATCH --open-mode=append
# a recipe script in miniature: scripts/lib.sh's resume loop around srun, 2x2 on 4 ranks
cd "$ROOT" && source scripts/lib.sh
echo "job \$SLURM_JOB_ID restart count \${SLURM_RESTART_COUNT:-0}"
WORLD=4; LAUNCH=(srun --mpi=pmix -n 4); TRAINER=./train_gpt; OUT_DIR=\$RUN_DIR
FLAGS=(${TINY[*]} -tp 2 -pp 2 -steps $STEPS -o "\$OUT_DIR")
RESTART_WAIT=1 llmc_launch
EOF
job_state() { scontrol show job "$1" 2> /dev/null | grep -o "JobState=[A-Z_]*" | cut -d= -f2; }
job_is() { [ "$(job_state "$1")" = "$2" ]; }
job_gone() { # ended for good (a requeued job passes through PENDING again)
  case "$(job_state "$1")" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL) ;;
    *) return 1 ;;
  esac
}
running_step() { grep -q '"type":"train","step":3,' "$1" 2> /dev/null; } # training, a few steps in
# requeue_case NAME HOW: submit, wait until step 3 is logged, interrupt by HOW, wait for the end
requeue_case() {
  local name=$1 how=$2 dir="$TMP/$1" out="$TMP/$1.out" J
  J=$(RUN_DIR="$dir" sbatch --parsable -J "$name" -o "$out" "$TMP/jobs/requeue.sh" 2> "$TMP/$name.sbatch")
  if [ -z "$J" ]; then bad "$name: sbatch refused the job" "$TMP/$name.sbatch"; return; fi
  if ! wait_for 40 running_step "$dir/log.jsonl"; then bad "$name: job $J never reached step 3" "$out"; return; fi
  if [ "$how" = scancel ]; then
    scancel --signal=TERM "$J" # the job's steps only: the batch shell (lib.sh) goes on
  else
    scontrol requeue "$J"      # SIGTERM to everything, then the job runs again from the top
    # a requeued job waits for a BeginTime Slurm sets (over a minute here, 22.05): start it now
    wait_for 30 job_is "$J" PENDING && scontrol update JobId="$J" StartTime=now
  fi
  if ! wait_for 60 job_gone "$J"; then bad "$name: job $J still $(job_state "$J") after 60 s" "$out"; return; fi
  local k; k=$(grep -o "resumed from .*/ckpt_[0-9]* at step [0-9]*" "$out" | grep -o "[0-9]*$" | tail -n 1)
  local printed; printed=$(grep "^step " "$out" | awk '{ print $2 }' | tr '\n' ' ')
  train_rows "$dir/log.jsonl" > "$dir.rows"
  if [ "$(job_state "$J")" != COMPLETED ]; then bad "$name: job $J ended $(job_state "$J")" "$out"
  elif [ -z "$k" ] || [ "$k" -lt 1 ] || [ "$k" -ge "$STEPS" ]; then bad "$name: no resume from a checkpoint" "$out"
  elif [ "$printed" != "$(seq -s ' ' 1 "$STEPS") " ]; then bad "$name: steps not 1..$STEPS once each: $printed" "$out"
  elif ! cmp -s "$TMP/ref.rows" "$dir.rows"; then bad "$name: the resumed run differs from the uninterrupted one" "$out"
  elif [ "$how" = requeue ] && ! grep -q "restart count 1" "$out"; then bad "$name: the job did not run again" "$out"
  else
    local attempts restarts
    attempts=$(grep -c '^\[.*attempt' "$out")
    restarts=$(grep -o 'restart count [0-9]*' "$out" | tail -n 1 | grep -o '[0-9]*$')
    local msg="$name: stopped at step $k ($attempts attempts, Slurm restarts $restarts), resumed,"
    ok "$msg steps 1..$STEPS once, bit-identical to the uninterrupted run, COMPLETED"
  fi
}
requeue_case "scancel --signal=TERM, lib.sh loop" scancel
requeue_case "scontrol requeue, the job runs again" requeue

# ---- 5. sbatch scripts/run_family.sh -------------------------------------------------------
# the recipe as submitted, #SBATCH header and srun line included; only the trainer (CPU for
# CUDA) and the model (tiny on KJV for GPT-3 125M) change, and the length
# shellcheck disable=SC2016  # $MODEL is the script's text, not this shell's
sed -e 's|^TRAINER=./train_gpt_cu$|TRAINER=./train_gpt|' \
    -e 's|-model "$MODEL" -V 50257|-model tiny -seq 32 -V 8192|' scripts/run_family.sh > "$TMP/jobs/run_family.sh"
if [ "$(diff scripts/run_family.sh "$TMP/jobs/run_family.sh" | grep -c '^>')" -ne 2 ]; then
  bad "run_family.sh: the sed copy did not change both lines (the script changed?)" \
    <(diff scripts/run_family.sh "$TMP/jobs/run_family.sh")
else
  J=$(MODEL=125m TOKENS=2000000 OUT_DIR="$TMP/family" TRAIN_GLOB="dev/data/kjv/kjv_train_*.bin" \
    VAL_GLOB="dev/data/kjv/kjv_val_*.bin" EXTRA_FLAGS="-steps 3 -threads 1" MAX_RESTARTS=0 LLMC_ROOT="$ROOT" \
    sbatch --parsable -o "$TMP/family.out" "$TMP/jobs/run_family.sh" 2> "$TMP/family.sbatch")
  if [ -z "$J" ]; then bad "sbatch run_family.sh: refused" "$TMP/family.sbatch"
  elif ! wait_for 60 job_gone "$J"; then bad "sbatch run_family.sh: job $J still $(job_state "$J") after 60 s" \
    "$TMP/family.out"
  elif ! job_is "$J" COMPLETED || ! scontrol show job "$J" | grep -q " ExitCode=0:0"; then
    bad "sbatch run_family.sh: job $J $(scontrol show job "$J" | grep -o 'JobState=[A-Z_]*\|ExitCode=[0-9:]*' |
      xargs)" "$TMP/family.out"
  elif grep -q -- "^srun --mpi=pmix .*--ntasks=8 " "$TMP/family.out" && grep -q "^step      3 " "$TMP/family.out" &&
    grep -q "tp=1 pp=1 dp=8 world=8" "$TMP/family.out" && grep -q "finished$" "$TMP/family.out"; then
    ok "sbatch run_family.sh (MODEL=125m's layout, tiny model): srun --mpi=pmix of 8 ranks, 3 steps, exit 0"
  else bad "sbatch run_family.sh: the log lacks the srun line, step 3 or 'finished'" "$TMP/family.out"; fi
fi

finish
