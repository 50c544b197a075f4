#!/usr/bin/env bash
# family_retention.sh: -keep and -overwrite never lose the only good checkpoints. With the
# newest checkpoints corrupt, a resume falls back to an older one; -keep then counts only
# checkpoints known to load (this run's saves and the one it resumed from), never deletes
# the resumed one, and the next -resume still finds one that loads. -overwrite 1 with an
# -init-from inside -o is refused before anything is deleted.
source "$(dirname "$0")/ckpt_common.sh"
need
E1=$SCRATCH/e1; E2=$SCRATCH/e2
corrupt() { # corrupt DIR: flip bytes in the payload of every rank file (the checksum no longer matches)
  local f; for f in "$1"/rank_*.bin; do printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null; done
}
D=$SCRATCH/r
run_tg "$E1" "$E2" "$TINY -steps 8 -ckpt-every 2 -o $D"
check "setup: a run with checkpoints 2, 4, 6, 8" [ "$RC" -eq 0 -a -f "$D/ckpt_00000008/DONE" ]
corrupt "$D/ckpt_00000006"; corrupt "$D/ckpt_00000008"
run_tg "$E1" "$E2" "$TINY -steps 5 -ckpt-every 1 -keep 2 -o $D -resume"
check "corrupt 6 and 8: -resume falls back to 4 and runs to step 5 (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q 'resumed from .*ckpt_00000004' '$E1'"
check "-keep 2 kept the resumed checkpoint 4 and this run's 5" \
  bash -c "[ -f '$D/ckpt_00000004/DONE' ] && [ -f '$D/ckpt_00000005/DONE' ]"
run_tg "$E1" "$E2" "$TINY -steps 6 -ckpt-every 1 -keep 2 -o $D -resume"
check "the next -resume finds a checkpoint that loads (rc $RC)" bash -c "[ $RC -eq 0 ] && grep -q 'resumed from .*ckpt_00000005' '$E1'"
check "-keep 2 after saving 6: 6 and the resumed 5 stay, 4 and 2 go (the unknown 8, newer, stays)" \
  bash -c "[ -f '$D/ckpt_00000006/DONE' ] && [ -f '$D/ckpt_00000005/DONE' ] && [ ! -e '$D/ckpt_00000004' ] && [ ! -e '$D/ckpt_00000002' ] && [ -e '$D/ckpt_00000008' ]"
# a directory holding only corrupt checkpoints newer than the good one: pruning keeps the good one
D=$SCRATCH/r2
run_tg "$E1" "$E2" "$TINY -steps 6 -ckpt-every 2 -o $D"
corrupt "$D/ckpt_00000004"; corrupt "$D/ckpt_00000006"
run_tg "$E1" "$E2" "$TINY -steps 3 -ckpt-every 1 -keep 1 -o $D -resume"
check "-keep 1 after falling back to 2: the resumed 2 and this run's 3 remain (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && [ -f '$D/ckpt_00000002/DONE' ] && [ -f '$D/ckpt_00000003/DONE' ]"
# -overwrite 1 with the -init-from source inside -o
D=$SCRATCH/ow
run_tg "$E1" "$E2" "$TINY -steps 4 -ckpt-every 2 -o $D"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $D -overwrite 1 -init-from $D/ckpt_00000004"
check "-overwrite 1 -init-from a checkpoint in -o: one error line" one_line_error "$E2" "$RC" "lies in -o"
check "... and nothing was deleted" bash -c "[ -f '$D/ckpt_00000004/DONE' ] && [ -f '$D/ckpt_00000002/DONE' ]"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $D/./ -overwrite 1 -init-from $D/../ow/ckpt_00000002"
check "... also when the paths are spelled differently" one_line_error "$E2" "$RC" "lies in -o"
cp -r "$D/ckpt_00000004" "$SCRATCH/src4"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $D -overwrite 1 -init-from $SCRATCH/src4"
check "-overwrite 1 -init-from a copy outside -o starts over (rc $RC)" bash -c "[ $RC -eq 0 ] && [ ! -e '$D/ckpt_00000004' ]"
# a renamed checkpoint directory (step 4 as ckpt_00000100) is skipped, not resumed first
D=$SCRATCH/mv
run_tg "$E1" "$E2" "$TINY -steps 6 -ckpt-every 2 -o $D"
mv "$D/ckpt_00000004" "$D/ckpt_00000100"
run_tg "$E1" "$E2" "$TINY -steps 7 -o $D -resume"
check "ckpt_00000004 renamed to ckpt_00000100: -resume skips it with the reason and takes 6 (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q 'resumed from .*ckpt_00000006' '$E1' && grep -q 'holds step 4, not the step its name says' '$E1' '$E2'"
rm -rf "$D/ckpt_00000006" "$D/ckpt_00000007"
run_tg "$E1" "$E2" "$TINY -steps 7 -o $D -resume"
check "... and with only it and 2 left, -resume takes 2 (rc $RC)" bash -c "[ $RC -eq 0 ] && grep -q 'resumed from .*ckpt_00000002' '$E1'"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $SCRATCH/mv2 -init-from $D/ckpt_00000100"
check "-init-from the renamed directory: one error line" one_line_error "$E2" "$RC" "rename it back to ckpt_00000004"
summary
