#!/usr/bin/env bash
# family_writes.sh: every write is checked. /dev/full accepts the open and fails every
# write with ENOSPC, like a full disk: the log (-log), the JSONL of validation, stdout
# (step lines, samples, -check, -h, -plan) and the planner's CSV must each end the run
# with one `error:` line and a non-zero exit, never exit 0 with the output lost.
source "$(dirname "$0")/lib.sh"
RUN=("$TRAIN" "${TINY[@]}")
export ALLOW_STEPS=1 # a write fails at the first record, i.e. after step 1
expect_err "-log /dev/full (defect 10)" "writing log file /dev/full failed" -- "${RUN[@]}" -steps 2 -log /dev/full
expect_err "-log /dev/full with validation" "writing log file /dev/full failed" -- "${RUN[@]}" -steps 2 -log /dev/full -val-every 1 -val-samples 2
expect_err "stdout on /dev/full (step lines)" "writing standard output failed" -- bash -c "'$TRAIN' ${TINY[*]} -steps 2 >/dev/full"
expect_err "stdout on /dev/full (samples)" "writing standard output failed" -- bash -c "'$TRAIN' ${TINY[*]} -steps 1 -sample-every 1 -sample-len 8 -tokenizer '$ROOT/dev/data/kjv/kjv_tokenizer.bin' >/dev/full"
expect_err "stdout into a pipe closed early (SIGPIPE not trapped)" "writing standard output failed: Broken pipe" -- \
  bash -c "trap - PIPE; '$TRAIN' ${TINY[*]} -steps 400 | head -c 100 > /dev/null; exit \${PIPESTATUS[0]}"
expect_err "-check with stdout on /dev/full" "writing standard output failed" -- bash -c "'$TRAIN' -check >/dev/full"
expect_err "-h with stdout on /dev/full" "writing standard output failed" -- bash -c "'$TRAIN' -h >/dev/full"
expect_err "-plan with stdout on /dev/full" "writing standard output failed" -- bash -c "'$TRAIN' -plan -cluster h100 -nodes 1 >/dev/full"
expect_err "-plan-csv /dev/full (defect 10)" "writing /dev/full failed" -- "$TRAIN" -plan -cluster h100 -nodes 1 -model 1.3b -plan-csv /dev/full
expect_err "-plan -scaling -plan-csv /dev/full" "writing /dev/full failed" -- "$TRAIN" -plan -cluster selene-a100 -model 530b -scaling 280,350 -plan-csv /dev/full
# controls: the same writes succeed where there is room, and the log really holds the steps
expect_ok "control: -log /dev/null" -- "${RUN[@]}" -steps 2 -log /dev/null
expect_ok "control: -log to a file" -- "${RUN[@]}" -steps 3 -log "$WORK/log.jsonl"
n=$(grep -c '"type":"train"' "$WORK/log.jsonl" 2>/dev/null || echo 0)
if [ "$n" -eq 3 ]; then pass "control: the log holds 3 train records"; else fail "control: the log holds 3 train records" "found $n"; fi
expect_ok "control: -plan-csv to a file" -- "$TRAIN" -plan -cluster h100 -nodes 1 -model 1.3b -plan-csv "$WORK/plan.csv"
if [ "$(wc -l < "$WORK/plan.csv")" -gt 1 ]; then pass "control: the CSV has rows"; else fail "control: the CSV has rows" "empty"; fi
attack_done
