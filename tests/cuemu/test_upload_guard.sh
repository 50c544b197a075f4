#!/usr/bin/env bash
# tests/cuemu/test_upload_guard.sh - train_gpt.cu's token uploads under the emulation's
# stream model (impl/streams.h): its pinned per-slot host arrays are guarded by an event;
# a mutant built without that wait (dev/cuda/cuda.mk: train_gpt_cu_noguard) must be stopped
# with "host wrote pinned buffer before its async copy ran" at the upload's line.
# Usage: test_upload_guard.sh EMULATED_TRAIN_GPT_CU NOGUARD_MUTANT; prints "N passed, M failed".
set -u
BIN=$1
NOGUARD=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { echo "ok   - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; printf '%s\n' "$2" | tail -4 | sed 's/^/       /'; fail=$((fail + 1)); }
# a 40000-token shard over a 300-token vocabulary (the llm.c .bin header)
python3 -c "
import struct, sys
h = [0] * 256; h[0] = 20240520; h[1] = 1; h[2] = 40000
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<256i', *h)); f.write(struct.pack('<40000H', *[(i * 7 + i // 13) % 300 for i in range(40000)]))
" "$TMP/p_000.bin"
ARGS=(-L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 2e-3 -warmup 1000 -decay 8000 -tokens 1e9
      -i "$TMP/p_000.bin" -j '' -seed 7 -threads 1 -steps 2)
out=$(cd "$TMP" && OMP_NUM_THREADS=1 timeout 300 "$BIN" "${ARGS[@]}" -o "$TMP/a" 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "step      2" <<<"$out"; then ok "4 micro-batches per step through pinned, event-guarded uploads"; else bad "guarded uploads (exit $rc)" "$out"; fi
out=$(cd "$TMP" && OMP_NUM_THREADS=1 timeout 300 "$NOGUARD" "${ARGS[@]}" -o "$TMP/b" 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -qE "host wrote pinned buffer before its async copy ran.*train_gpt.cu:[0-9]+" <<<"$out"; then
    ok "without the event guard: rewriting a slot before its upload event is reported"
else bad "unguarded uploads must be reported (exit $rc)" "$out"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
