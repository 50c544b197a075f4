#!/usr/bin/env bash
# family_disk.sh: the disk fills up during a checkpoint save. The save fails with an
# error and a non-zero exit, the previous checkpoint stays complete and loadable (also
# with -keep 1: pruning only follows a complete save), no partial checkpoint is left, and
# once there is space -resume continues bit-identically. Two ways to fill a disk: a 30 MB
# tmpfs (needs root; skipped, with a note, where mount is not allowed) and a file-size
# limit (ulimit -f, with SIGXFSZ ignored, so writes fail with EFBIG as on a full disk;
# single process only: mpirun's daemons do not keep SIGXFSZ ignored).
source "$(dirname "$0")/ckpt_common.sh"
need
ARGS="$TINY -ckpt-every 2"
REF=$SCRATCH/ref
eval "$BIN $ARGS -steps 6 -o $REF" > "$SCRATCH/ref.out" 2>&1
check "reference run" [ -f "$REF/ckpt_00000006/DONE" ]
no_partial() { ! compgen -G "$1/ckpt_*.tmp" > /dev/null && ! compgen -G "$1/ckpt_*.old" > /dev/null; }
last_error() { [ "$2" -ge 1 ] && [ "$2" -lt 124 ] && tail -1 "$1" | grep -q "^error: checkpoint at step $3 failed"; }
continue_elsewhere() { # FROM TO ARGS: copy a run to the big disk and resume it there
  rm -rf "$2"; cp -r "$1" "$2"; rm -f "$2/lock"
  eval "timeout 120 $BIN $3 -o $2 -resume" > "$2.out" 2> "$2.err"
}

# 1. a small tmpfs: the step-4 save (22 MB while step 2's is kept) does not fit
MNT=$SCRATCH/mnt; mkdir -p "$MNT"
if mount -t tmpfs -o size=30m tmpfs "$MNT" 2> /dev/null; then
  D=$MNT/run
  rc=0; eval "$BIN $ARGS -steps 6 -keep 1 -o $D" > "$SCRATCH/t.out" 2> "$SCRATCH/t.err" || rc=$?
  check "tmpfs full: the step-4 save fails: exit $rc, last line 'checkpoint at step 4 failed'" last_error "$SCRATCH/t.err" "$rc" 4
  check "tmpfs full: ckpt_00000002 is complete and kept (-keep 1 pruned nothing), no partial checkpoint" \
    bash -c "$(declare -f no_partial); [ -f '$D/ckpt_00000002/DONE' ] && [ ! -e '$D/ckpt_00000004' ] && no_partial '$D'"
  continue_elsewhere "$D" "$SCRATCH/t_cont" "$ARGS -steps 6"
  check "tmpfs full: resumed with space, bit-identical to the uninterrupted run" same_ckpt "$REF/ckpt_00000006" "$SCRATCH/t_cont/ckpt_00000006"
  # the disk already full at the start of a resume: the run stops at its first save
  dd if=/dev/zero of="$MNT/filler" bs=1M count=6 status=none 2>/dev/null
  rc=0; eval "$BIN $ARGS -steps 6 -o $D -resume" > "$SCRATCH/t2.out" 2> "$SCRATCH/t2.err" || rc=$?
  check "tmpfs full at resume: the save fails cleanly, ckpt_00000002 still loads" \
    bash -c "$(declare -f last_error no_partial); last_error '$SCRATCH/t2.err' $rc 4 && no_partial '$D' && [ -f '$D/ckpt_00000002/DONE' ]"
  # 2 ranks (dp 2, ZeRO-1): the step-4 save fails on a rank, every rank agrees, nothing partial remains
  rm -rf "$MNT"/*
  D=$MNT/run2
  rc=0; eval "timeout 120 $MPIRUN 2 $BIN $TINY -ckpt-every 2 -dp 2 -zero 1 -steps 6 -o $D" > "$SCRATCH/m.out" 2> "$SCRATCH/m.err" || rc=$?
  check "tmpfs full, 2 ranks: the step-4 save fails (exit $rc), ckpt_00000002 complete, no partial checkpoint" \
    bash -c "$(declare -f no_partial); [ $rc -ge 1 ] && [ $rc -lt 124 ] && grep -q 'checkpoint at step 4 failed' '$SCRATCH/m.err' && [ -f '$D/ckpt_00000002/DONE' ] && [ ! -e '$D/ckpt_00000004' ] && no_partial '$D'"
  umount "$MNT"
else
  echo "note: mount -t tmpfs is not allowed here: the tmpfs cases are skipped (the file-size cases below still run)"
fi

# file_limit NAME TRAP WHAT: resume ckpt_00000002 in $SCRATCH/NAME under a file-size limit of
# 10 MB (a rank file is 22 MB) with SIGXFSZ set to TRAP in the shell: the step-4 save fails
# with an error naming the file, ckpt_00000002 stays complete, nothing partial is left
file_limit() {
  D=$SCRATCH/$1
  mkdir -p "$D"; cp -r "$REF/ckpt_00000002" "$D/"
  rc=0; bash -c "trap '$2' XFSZ; ulimit -f 10000; exec $BIN $ARGS -steps 6 -keep 1 -o $D -resume" > "$D.out" 2> "$D.err" || rc=$?
  check "$3: the step-4 save fails: exit $rc, 'checkpoint at step 4 failed'" last_error "$D.err" "$rc" 4
  check "$3: the failing file is named, ckpt_00000002 complete, no partial checkpoint" \
    bash -c "$(declare -f no_partial); grep -q 'rank_00000.bin failed' '$D.err' && [ -f '$D/ckpt_00000002/DONE' ] && [ ! -e '$D/ckpt_00000004' ] && no_partial '$D'"
}

# 2. every save fails
file_limit lim "" "file limit"
continue_elsewhere "$D" "$SCRATCH/l_cont" "$ARGS -steps 6"
check "file limit: resumed without the limit, bit-identical" same_ckpt "$REF/ckpt_00000006" "$SCRATCH/l_cont/ckpt_00000006"

# 3. the same limit without the shell's trap: the trainer ignores SIGXFSZ itself (the signal
# would kill it with no error line and no checkpoint)
file_limit lim_notrap - "file limit, SIGXFSZ not trapped"
summary
