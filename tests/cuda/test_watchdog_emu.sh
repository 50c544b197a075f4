#!/usr/bin/env bash
# tests/cuda/test_watchdog_emu.sh - the step watchdog's report (llmc/host/colltrace.h) in the
# CUDA trainer under the emulation, over NCCL (emulated NCCL blocks at the call, as MPI does):
# a SIGSTOPped rank of a 2x2x2 job is named with the NCCL collective it was in, every rank
# gets a line, and a mutant in which rank 0 skips the tied embedding's all-reduce of step 3
# (dev/cuda/cuda.mk: train_gpt_cu_deadlock) ends with the deadlock named on both sides.
# Usage: test_watchdog_emu.sh EMULATED_TRAIN_GPT_CU DEADLOCK_MUTANT; prints "N passed, M failed".
set -u
BIN=$1
MUTANT=$2
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    local p
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
pass=0
fail=0
ok() { echo "ok   - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; [ -f "${2:-}" ] && tail -12 "$2" | sed 's/^/       /'; fail=$((fail + 1)); }
# a 40000-token shard over a 300-token vocabulary (the llm.c .bin header)
python3 -c "
import struct, sys
h = [0] * 256; h[0] = 20240520; h[1] = 1; h[2] = 40000
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<256i', *h)); f.write(struct.pack('<40000H', *[(i * 7 + i // 13) % 300 for i in range(40000)]))
" "$TMP/p_000.bin"
ARGS="-L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 2e-3 -warmup 1000 -decay 8000"
ARGS="$ARGS -tokens 1e9 -i $TMP/p_000.bin -j '' -seed 7 -threads 1 -tp 2 -pp 2 -dp 2 -comm nccl -timeout 6"
# CUEMU_STREAM_RACES=0: -dp 2 over NCCL overlaps the DP buckets, which the stream detector
# cannot judge (it sees a kernel's accesses as its whole allocation; test_gpt.cu says more)
MPI="timeout 300 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES=8 -x OMP_NUM_THREADS=1"
MPI="$MPI -x CUEMU_STREAM_RACES=0 -np 8"
ntrain() { local n; n=$(grep -c '"type":"train"' "$1" 2>/dev/null); echo "${n:-0}"; }

# rank 5 stopped after 2 steps
d=$TMP/stop
eval "$MPI $BIN $ARGS -steps 100000 -o $d" > "$d.out" 2> "$d.err" & bg=$!
i=0
while [ "$i" -lt 3000 ] && [ "$(ntrain "$d/log.jsonl")" -lt 2 ] && kill -0 "$bg" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
target=""
for p in $(pgrep -f -- "-o $d( |$)"); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$(basename "$BIN")" ] || continue
    PIDS+=("$p")
    ls -l /proc/"$p"/fd 2>/dev/null | grep -q "$d/log_rank00005.jsonl" && target=$p
done
[ -n "$target" ] && kill -STOP "$target"
rc=0; wait "$bg" || rc=$?
[ -n "$target" ] && kill -CONT "$target" 2>/dev/null
if [ -n "$target" ] && [ $rc -eq 5 ] &&
    grep -Eq "rank 5 \(pid $target\) is not responding.*; there it (waits [0-9]+ s in|computes; last left|waits [0-9]+ s for the device)" "$d.err" &&
    grep -Eq "rank 5 \(pid $target\) is not responding.*(tp|dp|pp|emb|world) [a-z_]+ #[0-9]+ " "$d.err"; then
    ok "2x2x2 NCCL, rank 5 stopped: exit 5, named as not responding with its last collective"
else bad "2x2x2 NCCL, rank 5 stopped (exit $rc, target '$target')" "$d.err"; fi
if [ "$(grep -cE '^watchdog:   rank [0-7] \(tp [01], dp [01], pp [01]\) ' "$d.err")" -eq 8 ]; then
    ok "2x2x2 NCCL, rank 5 stopped: a line per rank"
else bad "2x2x2 NCCL: a line per rank" "$d.err"; fi

# the planted deadlock
d=$TMP/dl
rc=0; eval "$MPI $MUTANT $ARGS -steps 6 -o $d" > "$d.out" 2> "$d.err" || rc=$?
if [ $rc -eq 5 ] && [ "$(ntrain "$d/log.jsonl")" -eq 2 ] && grep -q 'the ranks wait for each other (a deadlock' "$d.err" &&
    grep -Eq 'rank 0 waits in world allreduce #[0-9]+ \(step 3\), but rank 4 has entered only' "$d.err" &&
    grep -Eq 'rank 4 waits in emb allreduce #3 \(step 3\), but rank 0 has entered only 2 emb operations' "$d.err"; then
    ok "planted deadlock over NCCL: exit 5 after 2 steps, both sides named (rank 0 in world, rank 4 in emb)"
else bad "planted deadlock over NCCL (exit $rc)" "$d.err"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
