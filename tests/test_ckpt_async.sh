#!/usr/bin/env bash
# test_ckpt_async.sh: background checkpoints (-ckpt-async 1) give the synchronous save's bytes.
#   bash tests/test_ckpt_async.sh                     the CPU trainer (./train_gpt): 1x1x1 and, over
#                                                     mpirun, 2x2x2 ZeRO-1
#   bash tests/test_ckpt_async.sh --cuda BIN MUTANT   the CUDA trainer under the CPU emulation (cuemu)
# Each layout runs twice from the same seed, once saving synchronously (the reference: the format
# and its bytes are checked elsewhere, test_gpt and the ckpt attack family), once in the background:
# every checkpoint's files must be byte-equal and every step's loss and gradient norm the same; a
# run resumed from a background checkpoint must end with the reference's final checkpoint and
# losses. Under the emulation the stream-hazard detector is on (the staging copy runs on a side
# stream: it must not race the next step's update), and MUTANT, the trainer without the update's
# wait for that copy (dev/cuda/cuda.mk), must be stopped by the detector.
set -u
cd "$(dirname "$0")/.." || exit 1
export OMP_NUM_THREADS=1
PASS=0; FAIL=0
ok() { PASS=$((PASS + 1)); echo "PASS $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 8 "$2" | sed 's/^/    | /'; }
TMP=$(mktemp -d /tmp/llmc_ckpt_async.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
KJV=dev/data/kjv/kjv_train_000.bin
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
BIN=./train_gpt; CUDA=0; MUTANT=""
if [ "${1:-}" = "--cuda" ]; then BIN=${2:?--cuda BIN MUTANT}; MUTANT=${3:-}; CUDA=1; fi
if [ ! -x "$BIN" ] || [ ! -f "$KJV" ]; then
  echo "FAIL setup: $BIN or $KJV missing (make train_gpt data)"; echo "0 passed, 1 failed"; exit 1
fi
# tiny at -seq 32 (2 layers under the emulation); the learning rate and ramp make every step count
if [ "$CUDA" = 1 ]; then
  MODEL="-model tiny -L 2 -seq 32 -V 8192"
  export CUEMU_DEVICES=8 CUEMU_STREAM_RACES=1 LLMC_DP_OVERLAP=0 # the detector cannot judge the DP overlap
  MPIX="-x CUEMU_DEVICES -x CUEMU_STREAM_RACES -x LLMC_DP_OVERLAP -x OMP_NUM_THREADS"
else
  MODEL="-model tiny -seq 32 -V 8192"
  MPIX="-x OMP_NUM_THREADS"
fi
# checkpoints every 2 steps: a save mid-run and one at the end (and one more on the CPU, where steps are cheap)
STEPS=6; [ "$CUDA" = 1 ] && STEPS=4
CKPTS=$(seq 2 2 $STEPS | tr '\n' ' ')
ARGS="$MODEL -mb 1 -gb 8 -ramp 4 4 200 -lr 2e-3 -warmup 128 -j '' -threads 1 -i $KJV -steps $STEPS -ckpt-every 2"

# "step loss gnorm" of every train record
records() { grep '"type":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]*),.*"gnorm":([^,]*),.*/\1 \2 \3/'; }
# same_dir A B: the same rank files, byte for byte, and DONE in both
same_dir() {
  local f n=0
  [ -f "$1/DONE" ] && [ -f "$2/DONE" ] || return 1
  for f in "$1"/rank_*.bin; do cmp -s "$f" "$2/$(basename "$f")" || return 1; n=$((n + 1)); done
  [ "$n" -ge 1 ] && [ "$n" -eq "$(ls "$2"/rank_*.bin | wc -l)" ]
}
races() { grep -h "cuemu: FATAL" "$@" 2> /dev/null | head -1; }

# layout NAME LAUNCH FLAGS: sync and async runs, every checkpoint and step compared; a resume from
# the async checkpoint of step 2 compared with the sync run's end
layout() {
  local name=$1 launch=$2 flags=$3 d0=$TMP/$1_sync d1=$TMP/$1_async d2=$TMP/$1_resumed rc0=0 rc1=0 rc2=0 s same=1
  eval "$launch $BIN $ARGS $flags -o $d0" > "$d0.out" 2>&1 || rc0=$?
  eval "$launch $BIN $ARGS $flags -ckpt-async 1 -o $d1" > "$d1.out" 2>&1 || rc1=$?
  for s in $CKPTS; do same_dir "$d0/ckpt_0000000$s" "$d1/ckpt_0000000$s" || same=0; done
  if [ "$rc0$rc1" = 00 ] && [ "$same" = 1 ] && [ -n "$(records "$d0/log.jsonl")" ] &&
    [ "$(records "$d0/log.jsonl")" = "$(records "$d1/log.jsonl")" ]; then
    ok "$name: checkpoints ${CKPTS% } byte-equal sync vs async, losses and gradient norms the same"
  else
    bad "$name: checkpoints ${CKPTS% } byte-equal sync vs async, losses the same (rc $rc0 $rc1, files same $same) $(races "$d0.out" "$d1.out")" "$d1.out"
  fi
  local n
  n=$(grep -c '"event":"checkpoint".*"async":1' "$d1/log.jsonl" 2> /dev/null)
  if [ "${n:-0}" = "$(wc -w <<< "$CKPTS")" ] && grep -q "saving ckpt 2" "$d1.out"; then
    ok "$name: a checkpoint event per background save; the step line shows the save in flight"
  else bad "$name: a checkpoint event per background save ($n), 'saving ckpt 2' on a step line" "$d1.out"; fi
  mkdir -p "$d2" && cp -r "$d1/ckpt_00000002" "$d2/"
  eval "$launch $BIN $ARGS $flags -ckpt-async 1 -o $d2 -resume" > "$d2.out" 2>&1 || rc2=$?
  if [ "$rc2" = 0 ] && same_dir "$d0/ckpt_0000000$STEPS" "$d2/ckpt_0000000$STEPS" &&
    [ "$(records "$d0/log.jsonl" | tail -n $((STEPS - 2)))" = "$(records "$d2/log.jsonl")" ]; then
    ok "$name: resumed from the async checkpoint of step 2: steps 3-$STEPS and ckpt_0000000$STEPS equal the sync run's"
  else bad "$name: resumed from the async checkpoint of step 2 (rc $rc2) $(races "$d2.out")" "$d2.out"; fi
}

if [ "$CUDA" = 0 ]; then
  layout 1x1x1 "timeout 300" ""
  if command -v mpirun > /dev/null; then
    layout 2x2x2_zero1 "timeout 600 $MPIRUN $MPIX -np 8" "-tp 2 -pp 2 -dp 2 -zero 1"
  else bad "mpirun is available for the 2x2x2 ZeRO-1 case (bash dev/install.sh)"; fi
else
  layout cuda_1x1x1 "timeout 600" "-comm mpi"
  if command -v mpirun > /dev/null; then
    layout cuda_dp2_zero1_nccl "timeout 900 $MPIRUN $MPIX -np 2" "-dp 2 -zero 1 -comm nccl"
  else bad "mpirun is available for the ZeRO-1 case under the emulation (bash dev/install.sh)"; fi
  if [ -n "$MUTANT" ] && [ -x "$MUTANT" ]; then
    d=$TMP/nowait; rc=0
    eval "timeout 600 $MUTANT $ARGS -comm mpi -ckpt-async 1 -o $d" > "$d.out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && grep -q "cuemu: FATAL: cross-stream race.*cudaMemcpyAsync.*adamw_kernel" "$d.out"; then
      ok "the mutant whose update does not wait for the staging copy is stopped by the stream-hazard detector"
    else bad "the mutant without the update's wait must be stopped by the detector (rc $rc)" "$d.out"; fi
  else bad "the mutant $MUTANT is built (make $MUTANT)"; fi
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
