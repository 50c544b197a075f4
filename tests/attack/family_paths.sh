#!/usr/bin/env bash
# family_paths.sh: user paths. Over-long paths are errors (never truncated), a path is
# never used as a glob pattern except -i/-j (an -o holding [ ] * ? resumes from its own
# checkpoints, not another run's), missing or wrong-kind files and directories are
# one-line errors, unusual but legal names (spaces, a leading dash written ./-x) work.
source "$(dirname "$0")/lib.sh"
RUN=("$TRAIN" "${TINY[@]}")
P="$WORK/paths"; mkdir -p "$P"

# --- length: 511 characters are accepted, 512 are not (components below NAME_MAX)
seg="$(printf 'd%.0s' $(seq 200))"
base="$P/$seg/$seg"; pad=$((511 - ${#base} - 1))
ok511="$base/$(printf 'e%.0s' $(seq $pad))"
expect_ok "-o of exactly 511 characters" -- "$TRAIN" -check -o "$ok511"
expect_err "-o of 512 characters" "limit is 511" -- "$TRAIN" -check -o "${ok511}x"
expect_err "-log of 4096 characters" "limit is 511" -- "$TRAIN" -check -log "$P/$(printf 'l%.0s' $(seq 4096))"
expect_err "-i of 1000 characters" "limit is 511" -- "$TRAIN" -check -i "$P/$(printf 'i%.0s' $(seq 1000))"

# --- glob characters in -o: resume finds this run's own checkpoint (defect 9)
for name in 'r[1]' 's*' 'q?' 'b[!x]'; do
  o="$P/$name"
  expect_ok "train into -o '$name'" -- "${RUN[@]}" -steps 1 -o "$o" -ckpt-every 1
  run_case "${RUN[@]}" -steps 2 -o "$o" -ckpt-every 1 -resume
  if [ "$RC" -eq 0 ] && grep -qF "resumed from $o/ckpt_00000001 at step 1" "$OUT"; then pass "resume from -o '$name'"
  else fail "resume from -o '$name'" "exit $RC: $(head -c 200 "$ERR")"; fi
  expect_ok "-init-from '$name'/ckpt_00000001" -- "${RUN[@]}" -steps 1 -init-from "$o/ckpt_00000001"
done
# a decoy run whose name the glob pattern matches must not be picked up
mkdir -p "$P/decoy"
expect_ok "decoy run in 't1'" -- "${RUN[@]}" -steps 3 -o "$P/decoy/t1" -ckpt-every 3
expect_ok "own run in 't[1]'" -- "${RUN[@]}" -steps 1 -o "$P/decoy/t[1]" -ckpt-every 1
rm -rf "$P/decoy/t[1]/ckpt_00000001"/rank_*.bin
expect_err "resume 't[1]' with its rank files gone does not use 't1'" "no checkpoint files" -- "${RUN[@]}" -steps 4 -o "$P/decoy/t[1]" -resume

# --- names that are legal
expect_ok "-o with spaces" -- "${RUN[@]}" -steps 1 -o "$P/with space" -ckpt-every 1
expect_ok "-o ./-dash (leading dash written as ./)" -- bash -c "cd '$P' && '$TRAIN' ${TINY[*]} -steps 1 -i '$ROOT/dev/data/kjv/kjv_train_000.bin' -o ./-dash"
expect_ok "-i as a glob (allowed)" -- "$TRAIN" -check -V 8192 -i "$ROOT/dev/data/kjv/kjv_train_*.bin"

# --- wrong kinds and missing files
touch "$P/afile"; mkfifo "$P/fifo"; mkdir -p "$P/adir"
expect_err "-o is a regular file" -- "${RUN[@]}" -steps 1 -o "$P/afile"
expect_err "-log in a missing directory" "cannot open log file" -- "${RUN[@]}" -steps 1 -log "$P/nodir/log.jsonl"
expect_err "-log is a directory" "is a directory" -- "${RUN[@]}" -steps 1 -log "$P/adir"
expect_err "-log is a FIFO (defect 11)" "is a FIFO" -- "${RUN[@]}" -steps 1 -log "$P/fifo"
expect_err "check -log is a FIFO" "is a FIFO" -- "$TRAIN" -check -log "$P/fifo"
expect_err "-tokenizer missing" "cannot open tokenizer" -- "$TRAIN" -check -V 8192 -tokenizer "$P/none.bin"
expect_err "-tokenizer is a directory" "is a directory" -- "$TRAIN" -check -V 8192 -tokenizer "$P/adir"
expect_err "-tokenizer is a FIFO (defect 11)" "is a FIFO" -- "$TRAIN" -check -V 8192 -tokenizer "$P/fifo"
expect_err "run -tokenizer is a FIFO" "is a FIFO" -- "${RUN[@]}" -steps 1 -tokenizer "$P/fifo"
expect_err "-tokenizer /dev/zero" "character device" -- "$TRAIN" -check -V 8192 -tokenizer /dev/zero
expect_err "-tokenizer is a data shard" "bad magic" -- "$TRAIN" -check -V 8192 -tokenizer "$ROOT/dev/data/kjv/kjv_val_000.bin"
expect_err "-init-from missing" "not a checkpoint directory" -- "${RUN[@]}" -steps 1 -init-from "$P/none"
expect_err "-init-from a file" "not a checkpoint directory" -- "${RUN[@]}" -steps 1 -init-from "$P/afile"
expect_err "-init-from without DONE (defect 12)" "no DONE" -- "${RUN[@]}" -steps 1 -init-from "$P/adir"
expect_err "-resume with no checkpoint" "no complete checkpoint" -- "${RUN[@]}" -steps 1 -o "$P/adir" -resume
expect_err "-plan-csv is a FIFO" "is a FIFO" -- "$TRAIN" -plan -cluster h100 -nodes 1 -plan-csv "$P/fifo"
expect_err "-plan-csv in a missing directory" "cannot write" -- "$TRAIN" -plan -cluster h100 -nodes 1 -plan-csv "$P/nodir/x.csv"
attack_done
