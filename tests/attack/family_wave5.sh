#!/usr/bin/env bash
# family_wave5.sh: context parallelism (-cp), ZeRO (-zero 1/2/3) and background checkpoints
# (-ckpt-async 1) combined, as a hostile user would. A -cp 2 -zero 3 checkpoint (2 ranks) resumed
# in its own layout (byte for byte), under -cp 4, -dp 2 -zero 2, -cp 2 -pp 2 -vpp 2 (one layer per
# chunk) and on one process (steps 3-4 within 1e-5); its background saves byte-equal to the
# synchronous ones (a save every step, and saves queued behind a slow writer); its files forged
# (zero, dp, a shard's range, swapped, linked, truncated, padded, missing, stray, from another save, a
# flipped bit): one error line, or the older checkpoint taken by every rank. Layout edges: seq not a
# multiple of 2*cp, cp > seq/2, one row per chunk (a real run), -zero 3 at DP 8 on a model whose
# layers sit in one or two shards (a real run, = -zero 1 byte for byte), one micro-batch for two
# stages, a fixed ramp with -cp. The CUDA trainer's -check on the same flags where
# build/cuda-emu/train_gpt_cu exists. Signals, kill -9 and a full disk: family_wave5_stop.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/wave5_lib.sh"

# --- 1. references: a -cp 2 -zero 3 run with a checkpoint every step, synchronous and background
REF=$WORK/ref
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${S[@]}" "${CPZ[@]}" -steps 4 -ckpt-every 1 -o "$REF" > "$WORK/ref.out" 2>&1
verdict "reference: -cp 2 -zero 3 on 2 ranks, 4 steps, a checkpoint each" \
  "[ -f '$REF/ckpt_00000004/DONE' ] && [ \$(losses '$REF' | wc -l) = 4 ] && [ \$(ls '$REF/ckpt_00000002'/rank_*.bin | wc -l) = 2 ]" \
  "$(tail -c 300 "$WORK/ref.out" | tr '\n' ' ')"
A=$WORK/async
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${S[@]}" "${CPZ[@]}" -steps 4 -ckpt-every 1 -ckpt-async 1 -o "$A" \
  > "$WORK/async.out" 2>&1
ok=1
for s in 1 2 3 4; do same_ckpt "$REF/ckpt_0000000$s" "$A/ckpt_0000000$s" || ok=0; done
verdict "-cp 2 -zero 3 -ckpt-async 1 -ckpt-every 1: all 4 checkpoints byte-equal to the synchronous ones" \
  "[ $ok = 1 ] && close_losses '$REF' '$A' 0 1"
# a 400 ms writer: each save comes due while the previous one writes, on both ranks
Q=$WORK/queue
timeout -k 5 90 env LLMC_TEST_CKPT_DELAY_MS=400 "${MPI[@]}" -np 2 -x LLMC_TEST_CKPT_DELAY_MS "$MUT" "${S[@]}" "${CPZ[@]}" \
  -steps 4 -ckpt-every 1 -ckpt-async 1 -o "$Q" > "$WORK/queue.out" 2>&1
rc=$?
ok=1
for s in 1 2 3 4; do same_ckpt "$REF/ckpt_0000000$s" "$Q/ckpt_0000000$s" || ok=0; done
verdict "-cp 2 -zero 3 async, a slow writer: saves wait for the previous one (logged), all byte-equal (rc $rc)" \
  "[ $rc = 0 ] && [ $ok = 1 ] && grep -q 'waited .* ms for the save of step' '$WORK/queue.out' && no_partial '$Q'"

# --- 2. its step-2 checkpoint resumed in other layouts (the run record holds -cp 2: given again): steps 3-4
# against the reference's
resume_as() { # NAME NP TOL FLAGS...
  local name=$1 np=$2 tol=$3 d
  shift 3
  d="$WORK/r$RANDOM"
  mkdir -p "$d"
  cp -r "$REF/ckpt_00000002" "$REF/config.json" "$d/"
  timeout -k 5 60 "${MPI[@]}" -np "$np" "$TRAIN" "${S[@]}" -o "$d" -resume -steps 4 -ckpt-every 2 "$@" > "$d.out" 2>&1
  local rc=$?
  R_DIR=$d
  verdict "$name (rc $rc)" "[ $rc = 0 ] && grep -q 'resumed from .*ckpt_00000002' '$d.out' && close_losses '$REF' '$d' $tol 3" \
    "$(grep -m1 '^error' "$d.out") $(paste -d' ' <(losses "$REF" | tail -2) <(losses "$d" | tail -2) | tr '\n' ';')"
}
resume_as "-cp 2 -zero 3 checkpoint resumed in its own layout: the same losses" 2 0 "${CPZ[@]}"
verdict "... and its step-4 checkpoint byte-equal to the uninterrupted run's" "same_ckpt '$REF/ckpt_00000004' '$R_DIR/ckpt_00000004'"
resume_as "-cp 2 -zero 3 checkpoint resumed under -cp 4 -zero 3 (4 ranks): within 1e-5" 4 1e-5 -cp 4 -zero 3
resume_as "-cp 2 -zero 3 checkpoint resumed under -dp 2 -zero 2: within 1e-5" 2 1e-5 -cp 1 -dp 2 -zero 2
resume_as "-cp 2 -zero 3 checkpoint resumed on one process: within 1e-5" 1 1e-5 -cp 1 -zero 0
resume_as "-cp 2 -zero 3 checkpoint resumed under -cp 2 -pp 2 -vpp 2 -zero 3 (one layer per chunk): within 1e-5" 4 1e-5 \
  -cp 2 -pp 2 -vpp 2 -zero 3

# --- 3. forged and damaged files of the -cp 2 -zero 3 checkpoint (step 2 alone in a run directory):
# -resume ends in one error line (ckpt_forge.py recomputes the checksum: the header is self-consistent)
forged() { # NAME PATTERN EDIT: a fresh copy, EDIT run in its checkpoint directory, then a 1-process -resume
  local name=$1 pat=$2 edit=$3 d
  d="$WORK/f$RANDOM"
  mkdir -p "$d"
  cp -r "$REF/ckpt_00000002" "$REF/config.json" "$d/"
  (cd "$d/ckpt_00000002" && eval "$edit")
  expect_err "$name" "$pat" -- "$TRAIN" "${S[@]}" -cp 1 -o "$d" -resume -steps 3
}
F="$PY $FORGE"
forged "forged zero=0 in both files (self-consistent): the moments are a shard" "without ZeRO must cover" \
  "$F rank_00000.bin 11 0 && $F rank_00001.bin 11 0"
forged "forged zero=3 (the -zero level, not the file's 0/1)" "invalid header: zero=3" \
  "$F rank_00000.bin 11 3 && $F rank_00001.bin 11 3"
forged "forged dp=4 in both files: 2 rank files for a layout of 4" "has 2 rank files, its layout .*dp=4.* needs 4" \
  "$F rank_00000.bin 10 4 && $F rank_00001.bin 10 4"
forged "forged dp=1 in both files (CP x DP recorded as 1)" "has 2 rank files, its layout .*dp=1.* needs 1" \
  "$F rank_00000.bin 10 1 && $F rank_00001.bin 10 1"
forged "forged dp=4 in rank 1 only" "mixes files .*header entry 10" "$F rank_00001.bin 10 4"
forged "rank 1's shard offset moved back by one float (checksum redone)" "does not match its rank" \
  "$F rank_00001.bin 23 \$(( \$($PY -c 'import struct,sys; print(struct.unpack_from(\"<q\", open(\"rank_00001.bin\",\"rb\").read(), 184)[0])') - 1 ))"
forged "the two files swapped" "says it is rank" "mv rank_00000.bin x && mv rank_00001.bin rank_00000.bin && mv x rank_00001.bin"
forged "rank 1 a link to rank 0's file" "says it is rank 0" "rm rank_00001.bin && ln -s rank_00000.bin rank_00001.bin"
forged "rank 1's shard truncated by 4 bytes" "truncated or corrupt" "truncate -s -4 rank_00001.bin"
forged "rank 1's shard cut to its header" "truncated or corrupt" "truncate -s 1024 rank_00001.bin"
forged "rank 1's shard empty" "no complete header" ": > rank_00001.bin"
forged "rank 1's shard with 4 bytes appended" "truncated or corrupt" "printf 'abcd' >> rank_00001.bin"
forged "rank 1's shard missing" "has 1 rank files" "rm rank_00001.bin"
forged "a stray rank_00002.bin (a -cp 4 file) beside them" "has 3 rank files" "cp rank_00001.bin rank_00002.bin"
forged "rank 1's shard from the step-4 save" "mixes files of different runs or saves" "cp '$REF/ckpt_00000004/rank_00001.bin' ."
forged "one bit of rank 1's last v moment flipped" "checksum mismatch" \
  "$PY -c 'import sys; b=bytearray(open(\"rank_00001.bin\",\"rb\").read()); b[-1]^=1; open(\"rank_00001.bin\",\"wb\").write(b)'"
# the newest checkpoint damaged, an older one complete: every rank skips it and takes the older
d=$WORK/fallback
mkdir -p "$d"
cp -r "$REF/ckpt_00000002" "$REF/ckpt_00000003" "$REF/config.json" "$d/"
truncate -s -4 "$d/ckpt_00000003/rank_00001.bin"
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${S[@]}" "${CPZ[@]}" -o "$d" -resume -steps 4 -ckpt-every 2 > "$d.out" 2>&1
rc=$?
verdict "newest -cp 2 -zero 3 checkpoint truncated, 2 ranks: both skip it, resume step 2, end byte-equal (rc $rc)" \
  "[ $rc = 0 ] && grep -q 'skips .*ckpt_00000003' '$d.out' && grep -q 'resumed from .*ckpt_00000002' '$d.out' && same_ckpt '$REF/ckpt_00000004' '$d/ckpt_00000004'" \
  "$(grep -m2 'error\|warning' "$d.out" | tr '\n' ' ')"
# the only checkpoint damaged, under mpirun: every rank exits, non-zero, with the reason
d=$WORK/fmpi
mkdir -p "$d"
cp -r "$REF/ckpt_00000002" "$REF/config.json" "$d/"
truncate -s -4 "$d/ckpt_00000002/rank_00000.bin"
run_case "${MPI[@]}" -np 2 "$TRAIN" "${S[@]}" "${CPZ[@]}" -o "$d" -resume -steps 4
why=""
bad_run > /dev/null && why=$(bad_run)
verdict "the only checkpoint truncated, 2 ranks -cp 2 -zero 3: every rank exits non-zero with the reason, no step" \
  "[ -z '$why' ] && [ $RC -ne 0 ] && grep -q '^error: -resume: .*truncated or corrupt' '$ERR' && ! grep -q '^step ' '$OUT'" \
  "$why exit $RC: $(head -c 200 "$ERR" | tr '\n' ' ')"

# --- 6. layout edges
expect_err "-cp 2 -seq 34: a multiple of cp, not of 2*cp" "2\\*cp = 4 equal chunks" -- "${C[@]}" "${S[@]}" -seq 34 -cp 2 -world 2
expect_err "-cp 17 -seq 32: beyond seq/2" "2\\*cp = 34 equal chunks" -- "${C[@]}" "${S[@]}" -cp 17 -world 17
expect_ok "control: -cp 16 -seq 32 (one row per chunk) -world 16" -- "${C[@]}" "${S[@]}" -cp 16 -world 16
expect_err "-cp 2 -pp 2 -vpp 4 -L 4: half a layer per chunk" "pp\\*vpp = 2\\*4 must divide" -- "${C[@]}" "${S[@]}" -cp 2 \
  -pp 2 -vpp 4 -world 4
expect_err "-cp 2 -zero 1 -ramp auto (ZeRO-1 alone may): refused for CP" "which -cp 2 splits over ranks" -- "${C[@]}" \
  "${S[@]}" -cp 2 -zero 1 -gb 8 -ramp auto 4 4 -world 2
expect_ok "control: -zero 3 -dp 1048576 -world 1048576 (a 2-layer model: most shards empty)" -- "${C[@]}" "${S[@]}" -L 2 -H 32 \
  -heads 2 -zero 3 -gb 1048576 -mb 1 -world 1048576
# one row per chunk: -cp 4 at seq 8 on 4 ranks against one process
for np in 1 4; do
  timeout -k 5 60 "${MPI[@]}" -np "$np" "$TRAIN" "${S[@]}" -seq 8 -cp "$np" -steps 3 -o "$WORK/row$np" > "$WORK/row$np.out" 2>&1
done
verdict "real run -cp 4 -seq 8 (one row per chunk, 4 ranks): one process's losses within 1e-5" \
  "close_losses '$WORK/row1' '$WORK/row4' 1e-5 1 && [ \$(losses '$WORK/row4' | wc -l) = 3 ]" "$(tail -c 200 "$WORK/row4.out" | tr '\n' ' ')"
# -zero 3 at DP 8 on a 2-layer H 32 model: each layer's bucket lies in one or two of the 8 shards,
# so most ranks send and receive empty parts; one micro-batch per rank: -zero 1's checkpoint byte for byte
Z=(-L 2 -H 32 -heads 2 -seq 32 -V 8192 -mb 1 -gb 8 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1 -i "$KJV" -dp 8 -steps 3)
timeout -k 5 90 "${MPI[@]}" -np 8 "$TRAIN" "${Z[@]}" -zero 1 -o "$WORK/d8z1" > "$WORK/d8z1.out" 2>&1
timeout -k 5 90 "${MPI[@]}" -np 8 "$TRAIN" "${Z[@]}" -zero 3 -ckpt-async 1 -o "$WORK/d8z3" > "$WORK/d8z3.out" 2>&1
verdict "real run -dp 8 -zero 3 -ckpt-async 1 (layers in one or two shards): -zero 1's losses and checkpoint byte for byte" \
  "close_losses '$WORK/d8z1' '$WORK/d8z3' 0 1 && same_ckpt '$WORK/d8z1/ckpt_00000003' '$WORK/d8z3/ckpt_00000003'" \
  "$(tail -c 200 "$WORK/d8z3.out" | tr '\n' ' ')"
# one micro-batch per DP rank over 2 stages (fewer micro-batches than stages) with -zero 3, against one process
P=(-model tiny -seq 32 -V 8192 -mb 1 -gb 2 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1 -i "$KJV" -steps 3)
timeout -k 5 60 "${MPI[@]}" -np 4 "$TRAIN" "${P[@]}" -pp 2 -dp 2 -zero 3 -o "$WORK/pp2" > "$WORK/pp2.out" 2>&1
timeout -k 5 60 "$TRAIN" "${P[@]}" -o "$WORK/pp1" > "$WORK/pp1.out" 2>&1
verdict "real run -pp 2 -dp 2 -zero 3 -gb 2 (one micro-batch for 2 stages): one process's losses within 1e-5" \
  "close_losses '$WORK/pp1' '$WORK/pp2' 1e-5 1 && [ \$(losses '$WORK/pp2' | wc -l) = 3 ]" "$(tail -c 200 "$WORK/pp2.out" | tr '\n' ' ')"
# a fixed ramp (2 sequences, then 4) with -cp 2 -zero 3: the batch changes under CP
RP=(-model tiny -seq 32 -V 8192 -mb 2 -gb 4 -ramp 2 2 128 -lr 1e-3 -warmup 0 -j '' -threads 1 -i "$KJV" -steps 4)
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${RP[@]}" "${CPZ[@]}" -o "$WORK/rampcp" > "$WORK/rampcp.out" 2>&1
timeout -k 5 60 "$TRAIN" "${RP[@]}" -o "$WORK/ramp1" > "$WORK/ramp1.out" 2>&1
verdict "real run -cp 2 -zero 3 with a fixed ramp 2 -> 4: one process's losses and batches within 1e-5" \
  "close_losses '$WORK/ramp1' '$WORK/rampcp' 1e-5 1 && grep -q '| gb 2 |' '$WORK/rampcp.out' && grep -q '| gb 4 |' '$WORK/rampcp.out'" \
  "$(tail -c 200 "$WORK/rampcp.out" | tr '\n' ' ')"

# --- 7. the CUDA trainer's -check on the same flags (the emulated build)
if [ -x "$CUTRAIN" ]; then
  CU=("$CUTRAIN" -check -seq 32 -V 8192 -gb 4 -ramp off)
  expect_err "cuda: -cp 3 -seq 32" "2\\*cp = 6 equal chunks" -- "${CU[@]}" -cp 3 -world 3
  expect_err "cuda: -cp 2 -seq 34" "2\\*cp = 4 equal chunks" -- "${CU[@]}" -seq 34 -cp 2 -world 2
  expect_err "cuda: -cp 2 on 3 ranks" "world size 3" -- "${CU[@]}" -cp 2 -world 3
  expect_err "cuda: -cp 2 -ramp auto" "ramp auto" -- "${CU[@]}" -cp 2 -gb 8 -ramp auto 4 4 -world 2
  expect_err "cuda: -zero 3 -ramp auto" "ramp auto" -- "${CU[@]}" -zero 3 -gb 8 -ramp auto 4 4 -world 2
  expect_err "cuda: -zero 4" "-zero 4" -- "${CU[@]}" -zero 4
  expect_err "cuda: -ckpt-async 2" "-ckpt-async" -- "${CU[@]}" -ckpt-async 2
  expect_ok "cuda control: -cp 2 -pp 2 -vpp 2 -zero 3 -ckpt-async 1 -world 4" -- "${CU[@]}" -cp 2 -pp 2 -vpp 2 -zero 3 \
    -ckpt-async 1 -world 4
else
  echo "note: $CUTRAIN missing: the CUDA trainer's cases are skipped (built by make cuda-emu-test)"
fi
attack_done
