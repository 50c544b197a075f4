#!/usr/bin/env bash
# run_cpu.sh: the README's quickstart run on a laptop CPU (a few minutes on 2 cores).
#
# Trains the `tiny` preset (L=4, H=128, 4 heads, seq 256; 1.9M parameters with the KJV
# vocabulary of 8192) on the King James Bible with the Megatron-Turing NLG 530B recipe
# scaled down from 270B tokens to ~0.8M tokens (a bit less than one pass over the
# 0.93M-token training split). It prints the validation loss every VAL_EVERY steps and
# a text sample at the end, and writes checkpoints and the JSONL log under $OUT.
#
# Every value below can be overridden from the environment, e.g.
#   TOKENS=400000 VAL_EVERY=20 bash scripts/run_cpu.sh
#   DRY_RUN=1 bash scripts/run_cpu.sh      # print the command, validate the flags, exit
#   FRESH=1 bash scripts/run_cpu.sh        # delete the checkpoints in $OUT and start over
# A rerun with checkpoints in $OUT resumes that run (a finished one says so); it never
# deletes them unless FRESH=1.
#
# How the recipe is scaled (paper value -> here, and why):
#   shape of the LR schedule, kept: linear warmup, cosine decay to 10% of peak, and the
#     decay horizon placed beyond the end of training in the paper's proportion
#     (decay ends at 340B tokens, training stops at 270B: 340/270 = 1.26 of the run), so
#     the run ends, as the paper's did, at ~19% of peak rather than on the floor.
#   warmup 1B of 270B (0.37%) -> 4% of the run. 0.37% of 0.8M tokens is 3k tokens, less
#     than one step; a warmup must span at least the ~20-step memory of Adam's second
#     moment (beta2 = 0.95 -> 1/(1-0.95) = 20 steps) to do its job. 4% = 32k tokens
#     = the first 29 steps (27 at the ramp's starting batch of 4 sequences, 2 at 8).
#   batch ramp 32 -> 1920 in increments of 32 over 12B tokens (4.4%) -> 4 -> 16 in
#     increments of 4 over 10% of the run (3 increments: 4, 8, 12, then 16 sequences).
#     Same semantics (Megatron --rampup-batch-size), fewer and longer increments so each
#     batch size lasts long enough to be seen in the log (27, 13 and 9 steps); as in the
#     paper it ends after the warmup, early in the run.
#   global batch 1920 x 2048 tokens -> 16 x 256 = 4096 tokens: 225 optimizer steps in
#     all (the defaults make the last step a multiple of VAL_EVERY, so the final
#     evaluation is not a near-duplicate of the one before it).
#   peak LR 5e-5 (for 530B parameters) -> 2e-3: small models take much larger rates;
#     `-lr auto` (the GPT-3 power-law fit) gives 1.6e-3 for this size, 2e-3 is a touch
#     above. Higher rates do better on this short run (final validation loss 4.404 at
#     2e-3, 4.330 at 3e-3, 4.277 at LR=5e-3; falling at every evaluation at each); 2e-3
#     stays the default because the README's DP=4 run and its figures use it.
#   beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1, clip 1.0: unchanged (they do not
#     depend on the run length).
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"

TRAIN_GPT=${TRAIN_GPT:-./train_gpt}
OUT=${OUT:-out/cpu_tiny}
DATA=${DATA:-dev/data/kjv}
THREADS=${THREADS:-0}                  # OpenMP threads; 0 = all cores

# run length, in tokens (the recipe counts tokens, not steps)
TOKENS=${TOKENS:-800000}               # paper: 270e9
STEPS=${STEPS:--1}                     # stop early after this many steps (-1: run to TOKENS)
WARMUP=${WARMUP:-$((TOKENS * 4 / 100))}        # paper: 1e9   (0.37% of the run)
DECAY=${DECAY:-$((TOKENS * 340 / 270))}        # paper: 340e9 (1.26 x the run)
RAMP_TOKENS=${RAMP_TOKENS:-$((TOKENS * 10 / 100))} # paper: 12e9 (4.4% of the run)

# batch: micro-batch 4 sequences; global batch ramps 4 -> 16 in steps of 4
MB=${MB:-4}
GB=${GB:-16}                           # paper: 1920
RAMP_START=${RAMP_START:-4}            # paper: 32
RAMP_INC=${RAMP_INC:-4}                # paper: 32

LR=${LR:-2e-3}                         # paper: 5e-5 (LR=5e-3: lower loss, see above)

# evaluation, sampling, checkpoints (in steps)
VAL_EVERY=${VAL_EVERY:-25}             # 9 evaluations over the 225 steps
VAL_SAMPLES=${VAL_SAMPLES:-128}        # 128 x 256 = 32k validation tokens
SAMPLE_EVERY=${SAMPLE_EVERY:-100000}   # larger than the run: one sample, after the last step
SAMPLE_LEN=${SAMPLE_LEN:-64}
CKPT_EVERY=${CKPT_EVERY:-75}           # and always after the last step (22 MB each)
SEED=${SEED:-1337}

cmd=(
  "$TRAIN_GPT"
  # model: the tiny preset with the corpus' own BPE vocabulary (8192 ids, padded to 8192)
  -model tiny -V 8192 -vpad 1024
  # data
  -i "$DATA/kjv_train_*.bin" -j "$DATA/kjv_val_*.bin" -shuffle 1
  -tokenizer "$DATA/kjv_tokenizer.bin"
  # layout: one process, micro-batch MB sequences
  -tp 1 -pp 1 -mb "$MB" -threads "$THREADS"
  # recipe: batch ramp (Megatron semantics: START INCREMENT over TOKENS) to the final batch
  -gb "$GB" -ramp "$RAMP_START" "$RAMP_INC" "$RAMP_TOKENS"
  # recipe: LR schedule: linear warmup to LR, cosine decay to 10% of it ending at DECAY
  -lr "$LR" -warmup "$WARMUP" -decay "$DECAY" -minlr-frac 0.1
  # recipe: AdamW and clipping, the paper's values
  -beta1 0.9 -beta2 0.95 -eps 1e-8 -wd 0.1 -clip 1.0
  # run length
  -tokens "$TOKENS" -steps "$STEPS" -seed "$SEED"
  # evaluation, sampling, output
  -val-every "$VAL_EVERY" -val-samples "$VAL_SAMPLES"
  -sample-every "$SAMPLE_EVERY" -sample-len "$SAMPLE_LEN"
  -o "$OUT" -ckpt-every "$CKPT_EVERY"
)
# a run directory is never overwritten by accident: a rerun resumes (a finished run says so
# and exits); FRESH=1 deletes the checkpoints in $OUT and starts over
if compgen -G "$OUT/ckpt_*/DONE" > /dev/null; then
  if [ "${FRESH:-0}" = "1" ]; then
    cmd+=(-overwrite 1)
    echo "run_cpu.sh: FRESH=1: the checkpoints in $OUT are deleted, the run starts over"
  else
    cmd+=(-resume)
    echo "run_cpu.sh: $OUT holds checkpoints: resuming that run (FRESH=1 starts over)"
  fi
fi

if [ "${DRY_RUN:-0}" = "1" ]; then
  printf '%q ' "${cmd[@]}"; printf '%s\n' '-check'
  exec "${cmd[@]}" -check
fi

for f in "$TRAIN_GPT" "$DATA/kjv_train_000.bin" "$DATA/kjv_val_000.bin" "$DATA/kjv_tokenizer.bin"; do
  if [ ! -e "$f" ]; then
    echo "run_cpu.sh: $f is missing: run 'make train_gpt' and 'make data' first" >&2
    exit 1
  fi
done

printf '%q ' "${cmd[@]}"; printf '\n'
start=$(date +%s)
"${cmd[@]}"
echo "run_cpu.sh: done in $(( $(date +%s) - start )) s; log $OUT/log.jsonl, checkpoints $OUT/ckpt_*"
