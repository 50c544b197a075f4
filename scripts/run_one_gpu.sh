#!/usr/bin/env bash
# run_one_gpu.sh: the scaled-down correctness runs on one GPU, with the CUDA trainer.
#
#   MODEL=tiny bash scripts/run_one_gpu.sh         # minutes: the tiny preset on the KJV corpus
#   MODEL=125m bash scripts/run_one_gpu.sh         # the family's 125m run, on one GPU
#   MODEL=125m STEPS=200 bash scripts/run_one_gpu.sh   # its first 200 steps
#   DRY_RUN=1 MODEL=125m bash scripts/run_one_gpu.sh   # print the command, validate, exit
#
# What each run checks:
#   tiny  the whole recipe (ramp, warmup, cosine decay, AdamW, clipping, checkpoints,
#         evaluation, sampling) end to end on one GPU in a few minutes, on the offline
#         corpus (`make data`: the King James Bible with its own 8192-token BPE). Its
#         numbers compare with the CPU trainer's (scripts/run_cpu.sh runs the same model).
#   125m  exactly the recipe of `MODEL=125m scripts/run_family.sh` (same tokens, batch,
#         ramp, schedule, seed and data) on 1 GPU instead of 8: the loss of a step does not
#         depend on the layout, so the two logs must agree step for step up to bf16
#         reduction order. Only the micro-batch differs (4 here: one GPU has the memory,
#         and the micro-batch splits a step, it does not change it).
#
# The scaling rule is run_family.sh's: tokens = 20 x parameters; warmup, ramp and decay
# the paper's fractions of the run (1/270, 12/270, 340/270); the ramp in 60 equal steps
# (start = increment = GB/60); peak LR from `-lr auto`; the paper's AdamW values.
#   tiny: 1.9M parameters with the 8192 vocabulary -> 40M tokens (~43 passes over the
#         0.93M-token KJV training split: the validation loss will show the overfitting,
#         which is expected; TOKENS=4e6 stays under five passes). Its sequence is 256, so
#         the batch is counted in 256-token sequences: GB 480 (123k tokens), ramp 8 -> 480
#         by 8, micro-batch 8: ~330 steps.
#   125m: 2.5B tokens, GB 480 (ramp 8 -> 480 by 8), ~2,600 steps, ~7 hours on one A100.
#
# Environment (defaults in brackets):
#   MODEL        tiny | 125m [tiny]
#   TOKENS       run length [tiny 4e7, 125m 2.5e9]; warmup, ramp and decay follow it
#   STEPS        stop after this many steps [-1: run to TOKENS]
#   TRAIN_GLOB, VAL_GLOB, VOCAB, TOKENIZER  data [tiny: dev/data/kjv, V 8192;
#                125m: run_family.sh's FineWeb 10B shards, V 50257]
#   OUT_DIR      [out/one_gpu_$MODEL]    SEED [1337]
#   EXTRA_FLAGS  extra trainer flags, e.g. "-skip-spikes 4"
#   DRY_RUN, CHECK_BIN, MAX_RESTARTS, STOP_RC, RESTART_WAIT: see scripts/lib.sh
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"

ROOT="${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -f "$ROOT/scripts/lib.sh" ] || ROOT="${SLURM_SUBMIT_DIR:?run from the repository root, or set LLMC_ROOT}"
cd "$ROOT" && source scripts/lib.sh

MODEL=${MODEL:-tiny}
case "$MODEL" in
  tiny)
    DEF_TOKENS=40000000                       # 20 x 1.9M parameters, rounded
    GB=480; MB=8                              # sequences of 256 tokens
    VOCAB=${VOCAB:-8192}
    TRAIN_GLOB=${TRAIN_GLOB:-dev/data/kjv/kjv_train_*.bin}
    VAL_GLOB=${VAL_GLOB:-dev/data/kjv/kjv_val_*.bin}
    TOKENIZER=${TOKENIZER:-dev/data/kjv/kjv_tokenizer.bin}
    CKPT_EVERY=100; VAL_EVERY=25; SAMPLE_EVERY=100; VAL_SAMPLES=256 ;;
  125m)
    DEF_TOKENS=2500000000                     # 20 x 125M parameters
    GB=480; MB=4                              # as run_family.sh MODEL=125m (there MB 1 x DP 8)
    VOCAB=${VOCAB:-50257}
    TRAIN_GLOB=${TRAIN_GLOB:-dev/data/fineweb10B/fineweb_train_*.bin}
    VAL_GLOB=${VAL_GLOB:-dev/data/fineweb10B/fineweb_val_*.bin}
    TOKENIZER=${TOKENIZER:-}
    CKPT_EVERY=500; VAL_EVERY=100; SAMPLE_EVERY=0; VAL_SAMPLES=512 ;;
  *) echo "run_one_gpu.sh: MODEL must be tiny or 125m (got '$MODEL')" >&2; exit 1 ;;
esac
WORLD=1

TOKENS=${TOKENS:-$DEF_TOKENS}                 # paper: 270e9
STEPS=${STEPS:--1}
WARMUP=$((TOKENS / 270))                      # paper: 1e9   = 1/270 of the run
RAMP_TOKENS=$((TOKENS * 12 / 270))            # paper: 12e9  = 12/270
DECAY=$((TOKENS * 340 / 270))                 # paper: 340e9 = 340/270
RAMP_START=$((GB / 60))                       # paper: 32 = 1920/60
RAMP_INC=$((GB / 60))                         # paper: 32

TRAINER=./train_gpt_cu
OUT_DIR=${OUT_DIR:-out/one_gpu_$MODEL}
SEED=${SEED:-1337}

FLAGS=(
  -model "$MODEL" -V "$VOCAB" -vpad 1024 -scaled-init 1
  # one GPU: no model or data parallelism
  -tp 1 -pp 1 -dp 1 -mb "$MB" -recompute 0 -zero 0
  # batch ramp: GB/60 -> GB in increments of GB/60 over 12/270 of the run
  -gb "$GB" -ramp "$RAMP_START" "$RAMP_INC" "$RAMP_TOKENS"
  # LR: auto peak (GPT-3 fit), warmup 1/270 of the run, cosine to 10% at 340/270 of it
  -lr auto -warmup "$WARMUP" -decay "$DECAY" -minlr-frac 0.1
  # AdamW and clipping: the paper's values
  -beta1 0.9 -beta2 0.95 -eps 1e-8 -wd 0.1 -clip 1.0
  -tokens "$TOKENS" -steps "$STEPS"
  -i "$TRAIN_GLOB" -j "$VAL_GLOB" -shuffle 1 -seed "$SEED"
  -val-every "$VAL_EVERY" -val-samples "$VAL_SAMPLES"
  -o "$OUT_DIR" -ckpt-every "$CKPT_EVERY"
)
if [ -n "$TOKENIZER" ]; then FLAGS+=(-tokenizer "$TOKENIZER" -sample-every "$SAMPLE_EVERY" -sample-len 64); fi

LAUNCH=()                                     # one process
llmc_launch
