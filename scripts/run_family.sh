#!/usr/bin/env bash
# run_family.sh: the MT-NLG 530B recipe scaled down to GPT models of 125M to 6.7B
# parameters, each on one node of 8 GPUs (A100 80GB class).
#
#   MODEL=350m sbatch scripts/run_family.sh         # under Slurm (srun, 8 tasks)
#   MODEL=350m bash scripts/run_family.sh           # without Slurm: mpirun -np 8
#   DRY_RUN=1 MODEL=6.7b bash scripts/run_family.sh # print the command, validate for 8 ranks
#
# The scaling rule (what changes with the model size, and what does not):
#   1. Tokens D = 20 x N, N the nominal parameter count (Chinchilla's compute-optimal
#      ratio, Hoffmann et al. 2022): 2.5B, 7B, 26B, 134B tokens. The paper's own ratio
#      (270B tokens for 530B parameters, 0.5 per parameter) would give the 125m 64M tokens,
#      about 60 steps at its batch: too short to show anything, so the length follows
#      Chinchilla and the SHAPE of the run follows the paper.
#   2. The schedule keeps the paper's fractions of the run: warmup 1B/270B = D/270, batch
#      ramp 12B/270B = 12 D/270, cosine decay ending at 340B/270B = 1.26 D (after the end:
#      the run stops at ~19% of peak LR, as the paper's did), minimum 10% of peak.
#   3. Peak LR from `-lr auto`: the trainer's power law fitted to GPT-3's published rates
#      (llmc/host/schedule.h): 4.5e-4, 3.3e-4, 2.2e-4, 1.3e-4 for the four sizes.
#   4. Global batch: GPT-3's batch for the size (Brown et al. 2020, table 2.1: 0.5M, 0.5M,
#      1M, 2M tokens = 244, 244, 488, 977 sequences of 2048) rounded to the nearest multiple
#      of 60 x MB x DP (at least one), and the ramp keeps the paper's shape: start =
#      increment = GB/60 (the paper: 32 -> 1920 by 32, GB/60 each), so every batch the ramp
#      produces divides by MB x DP. Result: GB 480 (ramp 8 -> 480 by 8) for 125m, 350m,
#      1.3b; GB 960 (ramp 16 -> 960 by 16) for 6.7b.
#   5. Unchanged from the paper: micro-batch 1, sequence 2048, GPT-2 vocabulary (50257
#      padded to 51200), beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1, clipping 1.0,
#      ZeRO-1, scaled initialisation.
#   6. Layout on 8 GPUs (the layout planner, llmc/planner/planner.h, 1 node): TP 1 x PP 1 x DP 8
#      for 125m, 350m and 1.3b (10, 18, 18 GiB per GPU predicted); TP 2 x PP 1 x DP 4 for
#      6.7b (39 GiB; DP 8 alone would need 65 GiB of 80, too little headroom).
#      No recomputation: the activations fit.
# Time on 8 A100s (planner): 125m ~1 h, 350m ~7 h, 1.3b ~2.5 days, 6.7b ~8 weeks;
# TOKENS=... shortens a run and every fraction above scales with it.
#
# Environment (defaults in brackets):
#   MODEL        125m | 350m | 1.3b | 6.7b [125m]
#   TOKENS       run length in tokens [20 x N]; warmup, ramp and decay follow it
#   TRAIN_GLOB, VAL_GLOB  token shards, GPT-2 BPE [llm.c's FineWeb 10B:
#                a folder of fineweb_train_*.bin / fineweb_val_*.bin]
#   OUT_DIR      [out/family_$MODEL]     SEED [1337]
#   MB           micro-batch [1]; the global batch follows rule 4 (a larger MB can raise it)
#   LAUNCHER     srun | mpirun [srun inside a Slurm job, else mpirun]
#   SRUN_MPI     srun's --mpi plugin [pmix] (Open MPI 4 and 5 start through PMIx)
#   EXTRA_FLAGS  extra trainer flags, e.g. "-skip-spikes 4" or "-steps 100"
#   DRY_RUN, CHECK_BIN, MAX_RESTARTS, STOP_RC, RESTART_WAIT: see scripts/lib.sh
#
#SBATCH --job-name=gpt-family
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8          # one rank per GPU
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=16
#SBATCH --exclusive
#SBATCH --time=2-00:00:00
#SBATCH --requeue
#SBATCH --output=family_%j.log
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"

ROOT="${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -f "$ROOT/scripts/lib.sh" ] || ROOT="${SLURM_SUBMIT_DIR:?run from the repository root, or set LLMC_ROOT}"
cd "$ROOT" && source scripts/lib.sh

MODEL=${MODEL:-125m}
GPUS=8
MB=${MB:-1}                                   # paper: 1
# per size: nominal parameters N, GPT-3's batch in tokens, layout, and the checkpoint and
# evaluation intervals in steps (checkpoints ~10-15 minutes apart; 6.7b ~1 hour)
case "$MODEL" in
  #           N                GPT-3 batch           TP    PP    DP    ckpt            val
  125m) N=125000000;  GPT3_BATCH=500000;  TP=1; PP=1; DP=8; CKPT_EVERY=500; VAL_EVERY=100 ;;
  350m) N=350000000;  GPT3_BATCH=500000;  TP=1; PP=1; DP=8; CKPT_EVERY=250; VAL_EVERY=100 ;;
  1.3b) N=1300000000; GPT3_BATCH=1000000; TP=1; PP=1; DP=8; CKPT_EVERY=100; VAL_EVERY=50 ;;
  6.7b) N=6700000000; GPT3_BATCH=2000000; TP=2; PP=1; DP=4; CKPT_EVERY=50;  VAL_EVERY=25 ;;
  *) echo "run_family.sh: MODEL must be 125m, 350m, 1.3b or 6.7b (got '$MODEL')" >&2; exit 1 ;;
esac
WORLD=$((TP * PP * DP))
SEQ=2048

# the scaling rule (integers: the trainer takes token counts as integers)
TOKENS=${TOKENS:-$((20 * N))}                 # paper: 270e9 (here 20 tokens per parameter)
WARMUP=$((TOKENS / 270))                      # paper: 1e9   = 1/270 of the run
RAMP_TOKENS=$((TOKENS * 12 / 270))            # paper: 12e9  = 12/270
DECAY=$((TOKENS * 340 / 270))                 # paper: 340e9 = 340/270
UNIT=$((60 * MB * DP))                        # GB must be a multiple: 60 ramp steps of MB*DP multiples
GB=$(( (GPT3_BATCH / SEQ + UNIT / 2) / UNIT * UNIT ))   # nearest multiple of UNIT
if [ "$GB" -lt "$UNIT" ]; then GB=$UNIT; fi   # paper: 1920
RAMP_START=$((GB / 60))                       # paper: 32 = 1920/60
RAMP_INC=$((GB / 60))                         # paper: 32

TRAINER=./train_gpt_cu
OUT_DIR=${OUT_DIR:-out/family_$MODEL}
TRAIN_GLOB=${TRAIN_GLOB:-dev/data/fineweb10B/fineweb_train_*.bin}
VAL_GLOB=${VAL_GLOB:-dev/data/fineweb10B/fineweb_val_*.bin}
SEED=${SEED:-1337}

FLAGS=(
  # model: the preset (GPT-3 shapes), GPT-2 BPE vocabulary padded to a multiple of 1024
  -model "$MODEL" -V 50257 -vpad 1024 -scaled-init 1
  # layout on one node
  -tp "$TP" -pp "$PP" -dp "$DP" -mb "$MB" -recompute 0 -zero 1 -comm nccl
  # batch ramp: GB/60 -> GB in increments of GB/60 over 12/270 of the run
  -gb "$GB" -ramp "$RAMP_START" "$RAMP_INC" "$RAMP_TOKENS"
  # LR: auto peak (GPT-3 fit), warmup 1/270 of the run, cosine to 10% at 340/270 of it
  -lr auto -warmup "$WARMUP" -decay "$DECAY" -minlr-frac 0.1
  # AdamW and clipping: the paper's values
  -beta1 0.9 -beta2 0.95 -eps 1e-8 -wd 0.1 -clip 1.0
  -tokens "$TOKENS"
  -i "$TRAIN_GLOB" -j "$VAL_GLOB" -shuffle 1 -seed "$SEED"
  -val-every "$VAL_EVERY" -val-samples 512
  -o "$OUT_DIR" -ckpt-every "$CKPT_EVERY"
)

LAUNCHER=${LAUNCHER:-$([ -n "${SLURM_JOB_ID:-}" ] && echo srun || echo mpirun)}
case "$LAUNCHER" in
  # --mpi=pmix: Open MPI's ranks meet through Slurm's PMIx server, whatever the site's MpiDefault
  srun)   LAUNCH=(srun --mpi="${SRUN_MPI:-pmix}" --nodes=1 --ntasks="$WORLD" --ntasks-per-node="$GPUS"
                  --distribution=block:block --cpu-bind=cores --kill-on-bad-exit=1) ;;
  mpirun) LAUNCH=(mpirun -np "$WORLD" --bind-to numa) ;;
  *) echo "run_family.sh: LAUNCHER must be srun or mpirun" >&2; exit 1 ;;
esac
llmc_launch
