# shellcheck shell=bash
# ckpt_common.sh: what the checkpoint and run-lifecycle attack families share (sourced):
# the case counters and PASS/FAIL lines, a scratch directory removed at exit, the model
# flags (tiny, -seq 32, one thread) and helpers to run the trainer and inspect results.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export OMP_NUM_THREADS=1
BIN=${BIN:-./train_gpt}
PY=${PY:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe -np}
KJV=dev/data/kjv/kjv_train_000.bin
# the tiny preset at -seq 32: one step ~0.1 s on one core
TINY="-model tiny -seq 32 -V 8192 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1 -i $KJV"
NPASS=0; NFAIL=0
PIDS=()
SCRATCH=$(mktemp -d /tmp/llmc_attack.XXXXXX)
cleanup() {
  local p
  for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

pass() { echo "PASS $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; NFAIL=$((NFAIL + 1)); }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
summary() { echo "$NPASS passed, $NFAIL failed"; [ "$NFAIL" -eq 0 ]; }

# mpi_ok: the MPI cases run (not under ATTACK_NO_MPI=1: tests/attack/asan.sh's trainer has no MPI)
mpi_ok() { [ "${ATTACK_NO_MPI:-0}" != 1 ] && command -v mpirun > /dev/null; }

need() {
  if [ ! -x "$BIN" ] || [ ! -f "$KJV" ]; then
    echo "FAIL setup: $BIN or $KJV missing (make train_gpt data)"; echo "0 passed, 1 failed"; exit 1
  fi
}

# run_tg OUT ERR ARGS...: the trainer (eval'd, so ARGS may hold quotes); sets RC
run_tg() {
  local out=$1 err=$2; shift 2
  RC=0
  eval timeout 120 "$BIN" "$@" > "$out" 2> "$err" || RC=$?
}

# one_line_error ERR RC [NEEDLE]: exit 1..127, stderr exactly one line "error: ..." (with NEEDLE)
one_line_error() {
  local err=$1 rc=$2 needle=${3:-}
  [ "$rc" -ge 1 ] && [ "$rc" -lt 124 ] || return 1
  [ "$(wc -l < "$err")" -eq 1 ] || return 1
  grep -q '^error: ' "$err" || return 1
  [ -z "$needle" ] || grep -qF -- "$needle" "$err"
}

# steps_losses LOG: "step loss" of every train record, in order
steps_losses() { grep '"type":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]*),.*/\1 \2/'; }

# same_ckpt A B: every rank file byte-identical
same_ckpt() {
  local a=$1 b=$2 f n=0
  [ -f "$a/DONE" ] && [ -f "$b/DONE" ] || return 1
  for f in "$b"/rank_*.bin; do cmp -s "$f" "$a/$(basename "$f")" || return 1; n=$((n + 1)); done
  [ "$n" -ge 1 ] && [ "$n" -eq "$(ls "$a"/rank_*.bin | wc -l)" ]
}

# wait_for FILE_GLOB SECONDS: until a path matching the glob exists
wait_for() {
  local g=$1 t=$2 i=0
  while [ "$i" -lt $((t * 20)) ]; do compgen -G "$g" > /dev/null && return 0; sleep 0.05; i=$((i + 1)); done
  return 1
}

# rank_pids DIR: pids of the trainer processes writing -o DIR (this script's own runs)
rank_pids() { pgrep -f -- "-o $1( |$)" | while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$(basename "$BIN")" ] && echo "$p"; done; }
