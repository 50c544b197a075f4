# shellcheck shell=bash
# lib.sh: the mechanics shared by the GPU recipe scripts (run_mtnlg_530b.sh,
# run_family.sh, run_one_gpu.sh), sourced, never run. The scripts hold the recipe; this
# file holds the dry run and the automatic resume loop.
#
# A script sets, then calls llmc_launch:
#   WORLD        ranks the launch starts (= TP * PP * DP)
#   LAUNCH       array: the launcher prefix (srun ..., mpirun -np N, or empty for one process)
#   TRAINER      the GPU trainer binary (./train_gpt_cu)
#   FLAGS        array: every trainer flag, -o OUT_DIR among them
#   OUT_DIR      the run's directory (checkpoints ckpt_*/DONE, log.jsonl)
# Environment:
#   DRY_RUN=1        print the exact command of the first attempt, then run the CPU trainer's
#                    validation for WORLD ranks: $CHECK_BIN -check -world WORLD FLAGS
#                    (flags, model shape, layout constraints for the whole ramp) and exit
#                    with its status. No GPU, MPI or Slurm needed.
#   CHECK_BIN        the binary that validates (default ./train_gpt; `make train_gpt`)
#   EXTRA_FLAGS      appended to FLAGS (word-split), e.g. "-skip-spikes 4" or "-steps 100"
#   MAX_RESTARTS     attempts after the first one (default 20)
#   STOP_RC          trainer exit status meaning "stopped on purpose, do not restart"
#                    (default 3: the spike guard's K consecutive skips)
#   RESTART_WAIT     seconds between attempts (default 60)
# Trainer exit statuses (llmc/host/stop.h): 0 finished; 1 error; 3 spike guard (not restarted);
# 4 stopped by SIGTERM/SIGINT/SIGUSR1 after saving a checkpoint: continued at once with
# -resume, or, when this script got the signal too (a preemption or the time limit), it
# returns 4 so the job can be requeued (it resumes from that checkpoint); 5 the step
# watchdog ended a stuck job: restarted like a crash.

llmc_has_checkpoint() {
  # a complete checkpoint is a ckpt_* directory holding DONE (written last, atomically)
  compgen -G "$1/ckpt_*/DONE" > /dev/null
}

llmc_latest_checkpoint() {
  local d latest=""
  for d in "$1"/ckpt_*/DONE; do [ -e "$d" ] && latest=$(dirname "$d"); done
  echo "$latest"
}

llmc_launch() {
  if [ -n "${EXTRA_FLAGS:-}" ]; then
    # shellcheck disable=SC2206  # word-splitting is the point
    FLAGS+=( $EXTRA_FLAGS )
  fi
  local resume=()
  if llmc_has_checkpoint "$OUT_DIR"; then resume=(-resume); fi

  if [ "${DRY_RUN:-0}" = "1" ]; then
    local check_bin="${CHECK_BIN:-./train_gpt}"
    echo "# world $WORLD; the command (first attempt):"
    printf '%q ' ${LAUNCH[@]+"${LAUNCH[@]}"} "$TRAINER" "${FLAGS[@]}" ${resume[@]+"${resume[@]}"}; printf '\n'
    if [ ! -x "$check_bin" ]; then
      echo "DRY_RUN: $check_bin is missing: run 'make train_gpt' (or set CHECK_BIN)" >&2
      return 1
    fi
    echo "# validation:"
    printf '%q ' "$check_bin" -check -world "$WORLD" "${FLAGS[@]}"; printf '\n'
    "$check_bin" -check -world "$WORLD" "${FLAGS[@]}"
    return $?
  fi

  if [ ! -x "$TRAINER" ]; then
    echo "$TRAINER is missing: build it (make train_gpt_cu) on a machine with nvcc" >&2
    return 1
  fi
  # Pre-flight: the same validation on this host, so a bad flag or layout fails once,
  # here, instead of being retried by the loop below on thousands of GPUs.
  "$TRAINER" -check -world "$WORLD" "${FLAGS[@]}" || return 1
  mkdir -p "$OUT_DIR"

  local attempt=0 rc=0 before after stalled=0
  local max_restarts="${MAX_RESTARTS:-20}" stop_rc="${STOP_RC:-3}" wait_s="${RESTART_WAIT:-60}"
  # a signal to this script (Slurm signals the batch shell too) reaches the trainer as well;
  # the trainer finishes its step and saves; we only remember it, to not start another attempt
  LLMC_SIGNALLED=0
  trap 'LLMC_SIGNALLED=1' TERM INT USR1
  while :; do
    resume=()
    if llmc_has_checkpoint "$OUT_DIR"; then resume=(-resume); fi
    before=$(llmc_latest_checkpoint "$OUT_DIR")
    echo "[$(date '+%F %T')] attempt $attempt${before:+, resuming from $before}"
    printf '%q ' ${LAUNCH[@]+"${LAUNCH[@]}"} "$TRAINER" "${FLAGS[@]}" ${resume[@]+"${resume[@]}"}; printf '\n'
    rc=0
    ${LAUNCH[@]+"${LAUNCH[@]}"} "$TRAINER" "${FLAGS[@]}" ${resume[@]+"${resume[@]}"} || rc=$?
    if [ "$rc" -eq 0 ]; then echo "[$(date '+%F %T')] finished"; trap - TERM INT USR1; return 0; fi
    if [ "$rc" -eq 4 ]; then # stopped by a signal, with a checkpoint
      if [ "$LLMC_SIGNALLED" = "1" ]; then
        echo "[$(date '+%F %T')] stopped by a signal with a checkpoint (exit 4): requeue the job or rerun this script to resume" >&2
        trap - TERM INT USR1
        return 4
      fi
      echo "[$(date '+%F %T')] the trainer was signalled and saved a checkpoint (exit 4): resuming at once" >&2
      attempt=$((attempt + 1)); stalled=0
      if [ "$attempt" -gt "$max_restarts" ]; then echo "[$(date '+%F %T')] giving up after $attempt attempts" >&2; trap - TERM INT USR1; return 4; fi
      continue
    fi
    if [ "$rc" -eq "$stop_rc" ]; then
      echo "[$(date '+%F %T')] the trainer stopped on purpose (exit $rc, e.g. the spike guard): not restarting;" \
           "see the log, then resume by hand from the last checkpoint" >&2
      trap - TERM INT USR1
      return "$rc"
    fi
    after=$(llmc_latest_checkpoint "$OUT_DIR")
    # a crash that recurs before a new checkpoint is written is not a flaky node: stop
    if [ "$after" = "$before" ]; then stalled=$((stalled + 1)); else stalled=0; fi
    attempt=$((attempt + 1))
    if [ "$attempt" -gt "$max_restarts" ] || [ "$stalled" -ge 3 ]; then
      echo "[$(date '+%F %T')] giving up after $attempt attempts (exit $rc; $stalled in a row without a new checkpoint)" >&2
      trap - TERM INT USR1
      return "$rc"
    fi
    echo "[$(date '+%F %T')] exit $rc: restarting in $wait_s s from the latest complete checkpoint" >&2
    sleep "$wait_s"
  done
}

# run rather than sourced (bash scripts/lib.sh -h): the comment above, or why there is nothing to run
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  source "$(dirname "$0")/args.sh" && llmc_args "$0" "$@"
  echo "$(basename "$0"): sourced by the GPU recipe scripts, not run (see -h)" >&2
  exit 2
fi
