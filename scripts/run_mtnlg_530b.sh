#!/usr/bin/env bash
# run_mtnlg_530b.sh: the Megatron-Turing NLG 530B training run (Smith et al. 2022) as the
# paper describes it: 560 DGX A100 nodes (4480 A100 80GB GPUs), 3D parallelism TP 8 x PP 35
# x DP 16, 270B tokens. Every recipe value is spelled out as a flag below, next to where the
# paper gives it.
#
#   sbatch scripts/run_mtnlg_530b.sh                    # submit from the repository root
#   DRY_RUN=1 bash scripts/run_mtnlg_530b.sh            # anywhere: print the command and
#                                                       # validate flags + layout for 4480 ranks
# Environment (defaults in brackets):
#   BLEND        the training data: the paper's 15-dataset blend [scripts/mtnlg_blend.json]
#   TRAIN_GLOB   one stream of shards instead of the blend (llm.c format, GPT-2 BPE) [unset]
#   VAL_GLOB     validation shards, or a blend as -j takes it [/data/mtnlg/val_*.bin]
#   OUT_DIR      checkpoints and log [out/mtnlg_530b]
#   CKPT_EVERY   steps between checkpoints [the planner's interval, below]
#   CKPT_ASYNC   1: checkpoints written in the background (-ckpt-async) [1]
#   MTBF_HOURS   one node's mean time between failures, for the interval [6300]
#   VAL_EVERY    steps between evaluations [100]
#   RECOMPUTE [1]  activation recomputation: 1 = full (the paper), selective, or 0
#   SP [0]       1: Megatron sequence parallelism inside each TP group (Korthikanti et al. 2022)
#   VPP [1]      model chunks per pipeline rank (interleaved 1F1B). With the paper's batch
#                (120 micro-batches at full batch, 2 at the ramp's start) no V > 1 meets
#                Megatron's constraint (micro-batches a multiple of PP = 35): -check says so.
#                SP and VPP run in both trainers (train_gpt_cu: both backends; -vpp over NCCL
#                uses the phased schedule, README "Sequence parallelism ...").
#                What SP=1 RECOMPUTE=selective (and interleaving, at a batch that allows
#                it) would give this run: bash scripts/plan_530b_techniques.sh (planner
#                predictions: 280 nodes 61 -> 45 s per step, doc/planner.md).
#   SRUN_MPI     srun's --mpi plugin [pmix] (Open MPI 4 and 5 start through PMIx)
#   EXTRA_FLAGS  extra trainer flags, e.g. "-skip-spikes 4" (the loss-spike guard) or
#                "-steps 50" (a smoke test); the paper's run used neither instrument
#   DRY_RUN, CHECK_BIN, MAX_RESTARTS, STOP_RC, RESTART_WAIT: see scripts/lib.sh
#
# Data: the paper trains on a 339B-token blend of 15 datasets (Pile subsets, two Common Crawl
# snapshots, RealNews, CC-Stories), each with a weight and an epoch count (its Table 2).
# scripts/mtnlg_blend.json carries that table (and its sources) as a -blend file: the trainer
# samples it with Megatron's blending rule, each dataset shuffled per epoch. The dry run
# prints the epochs each dataset gets over 270B tokens beside the table's. Prepare one
# dataset per name as /data/mtnlg/NAME_train_*.bin (dev/data/prepare.py, GPT-2 BPE).
#
# Launch: one rank per GPU, 8 per node; ranks placed in order (block distribution) so that
# rank = tp + 8*dp + 128*pp puts each TP group (8 consecutive ranks) inside one node on
# NVLink, and pipeline/data-parallel traffic crosses InfiniBand, as in the paper. Each rank
# selects its GPU from its local rank. mpirun alternative (Open MPI, without Slurm):
#   mpirun -np 4480 --hostfile hosts --map-by ppr:8:node --bind-to numa \
#          ./train_gpt_cu <the flags below>
#
# Failures: at 4480 GPUs a node fails every day or so. The loop in scripts/lib.sh restarts
# the job step from the latest complete checkpoint (ckpt_*/DONE) with -resume, which
# continues bit-identically. If a node is gone for good the step cannot restart inside this
# allocation: with `#SBATCH --requeue` (below) `scontrol requeue $SLURM_JOB_ID` gets a new
# allocation, and this script, run again, resumes from the checkpoint.
#
# Cost (the layout planner, llmc/planner/planner.h, for this layout on 560 selene-a100 nodes):
# ~35 s per step at the full batch of 1920 x 2048 tokens, ~113k tokens/s, about four weeks
# for 270B tokens; a checkpoint (fp32 master weights + 2 moments, 12 bytes per parameter) is
# ~6.4 TB.
#
# Checkpoints: written in the background (CKPT_ASYNC=1: the loop stops only to copy each GPU's
# share to host memory), every CKPT_EVERY steps. Unless CKPT_EVERY is set, the planner chooses
# it: the Young/Daly interval sqrt(2 x stall per save x job MTBF), job MTBF = MTBF_HOURS per node
# / NODES, printed with the checkpoint's size, write time and stall (PREDICTED: the filesystem's
# bandwidth is an assumption, doc/planner.md "Checkpoints").
#
#SBATCH --job-name=mtnlg-530b
#SBATCH --nodes=560                  # 560 DGX A100 (the paper's run)
#SBATCH --ntasks-per-node=8          # one rank per GPU
#SBATCH --gpus-per-node=8            # 8 x A100 80GB per node
#SBATCH --cpus-per-task=16           # 128 cores per DGX A100 / 8 ranks
#SBATCH --exclusive
#SBATCH --time=14-00:00:00           # as long as the cluster allows; the resume loop and requeue span jobs
#SBATCH --requeue
#SBATCH --output=mtnlg_530b_%j.log
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"

# The repository root: the script's parent directory, or, under sbatch (which runs a copy
# of the script from its spool directory), the directory sbatch was called from.
ROOT="${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -f "$ROOT/scripts/lib.sh" ] || ROOT="${SLURM_SUBMIT_DIR:?run from the repository root, or set LLMC_ROOT}"
cd "$ROOT" && source scripts/lib.sh

# ---- cluster and 3D layout (paper: 560 nodes, TP 8 inside a node, PP 35, DP 16) --------
NODES=${NODES:-560}           # the paper's throughput table also has 280, 350 and 420
GPUS_PER_NODE=8
WORLD=$((NODES * GPUS_PER_NODE))
# LAYOUT=auto (the default): the trainer's planner picks TP/PP/DP/mb/vpp/sp/recompute/ZeRO
# for WORLD ranks of 80 GB A100s, 8 per node, and prints its choice and the runner-up; any of
# TP PP DP MB RECOMPUTE SP VPP ZERO set in the environment pins that dimension. LAYOUT=manual:
# the paper's layout, TP 8 inside a node (NVLink), PP 35 (3 layers per stage, 1F1B), DP the rest.
LAYOUT=${LAYOUT:-auto}
if [ "$LAYOUT" = "manual" ]; then
  LAYOUT_FLAGS=(-tp "${TP:-8}" -pp "${PP:-35}" -dp "${DP:-$((WORLD / (${TP:-8} * ${PP:-35})))}" -mb "${MB:-1}"
                -recompute "${RECOMPUTE:-1}" -sp "${SP:-0}" -vpp "${VPP:-1}" -zero "${ZERO:-1}")
else
  LAYOUT_FLAGS=(-layout auto -cluster selene-a100 -gpus-per-node "$GPUS_PER_NODE")
  for v in TP PP DP MB RECOMPUTE SP VPP ZERO; do
    if [ -n "${!v:-}" ]; then LAYOUT_FLAGS+=("-$(echo "$v" | tr '[:upper:]' '[:lower:]')" "${!v}"); fi
  done
fi

TRAINER=./train_gpt_cu
OUT_DIR=${OUT_DIR:-out/mtnlg_530b}
BLEND=${BLEND:-scripts/mtnlg_blend.json}
VAL_GLOB=${VAL_GLOB:-/data/mtnlg/val_*.bin}
VAL_EVERY=${VAL_EVERY:-100}

# ---- checkpoints: in the background, as often as the failure rate makes worth it ----------
CKPT_ASYNC=${CKPT_ASYNC:-1}
MTBF_HOURS=${MTBF_HOURS:-6300}
if [ -z "${CKPT_EVERY:-}" ]; then
  PLAN_BIN=$TRAINER
  [ "${DRY_RUN:-0}" = "1" ] && PLAN_BIN=${CHECK_BIN:-./train_gpt}
  if [ "$LAYOUT" = "manual" ]; then # the trainer's schedule for the given layout
    PLAN_LAYOUT=("${LAYOUT_FLAGS[@]}" -plan-schedule "$([ "${VPP:-1}" -gt 1 ] && echo interleaved || echo 1f1b)")
  else # the pins; the planner recommends what -layout auto will choose
    PLAN_LAYOUT=("${LAYOUT_FLAGS[@]:2}")
  fi
  PLAN=$("$PLAN_BIN" -plan -model 530b -L 105 -H 20480 -heads 128 -seq 2048 -V 50257 -vpad 1024 -gb 1920 \
         -cluster selene-a100 -gpus-per-node "$GPUS_PER_NODE" -nodes "$NODES" "${PLAN_LAYOUT[@]}" \
         -mtbf-hours "$MTBF_HOURS" 2>&1) || true
  CKPT_EVERY=$(printf '%s\n' "$PLAN" | sed -nE "s/^  -ckpt-async $CKPT_ASYNC: .* = -ckpt-every ([0-9]+),.*/\\1/p")
  if [ -n "$CKPT_EVERY" ]; then
    printf '%s\n' "$PLAN" | sed -n '/^checkpoints of the recommended layout/,/^  -ckpt-async 1:/p'
    echo "# CKPT_EVERY=$CKPT_EVERY: the planner's interval for -ckpt-async $CKPT_ASYNC"
  else
    CKPT_EVERY=100
    echo "# the planner gave no checkpoint interval for this layout (the validation below says why): CKPT_EVERY=100"
  fi
fi

FLAGS=(
  # model (paper): 105 layers, hidden 20480, 128 heads (head dim 160), sequence 2048;
  # GPT-2 BPE vocabulary 50257 padded to 51200 (a multiple of 1024, divisible by TP 8)
  -model 530b -L 105 -H 20480 -heads 128 -seq 2048 -V 50257 -vpad 1024
  -scaled-init 1                     # output projections N(0, s^2/(2L)), s = sqrt(1/(3H)) = 4.03e-3
  # layout: LAYOUT_FLAGS above (paper: TP 8, PP 35, DP 16, micro-batch 1, full recomputation,
  # ZeRO-1, no SP or interleaving, both of which came after it)
  "${LAYOUT_FLAGS[@]}"
  -comm nccl
  # batch: global batch 1920 sequences (3.9M tokens), ramped from 32 in increments of 32
  # over the first 12B tokens (Megatron --rampup-batch-size 32 32 5859375 sequences)
  -gb 1920 -ramp 32 32 12e9
  # learning rate: peak 5e-5, linear warmup over 1B tokens, cosine decay to 10% (5e-6)
  # at 340B tokens (after the end of training: the run ends at ~19% of peak)
  -lr 5e-5 -warmup 1e9 -decay 340e9 -minlr-frac 0.1
  # AdamW: beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1 (not on biases and LayerNorm),
  # gradient clipping at global L2 norm 1.0
  -beta1 0.9 -beta2 0.95 -eps 1e-8 -wd 0.1 -clip 1.0
  # length: 270B tokens
  -tokens 270e9
  # data, evaluation, output
  -j "$VAL_GLOB" -shuffle 1 -seed 1337
  -val-every "$VAL_EVERY" -val-samples 1920   # one full batch of validation sequences
  -o "$OUT_DIR" -ckpt-every "$CKPT_EVERY" -ckpt-async "$CKPT_ASYNC"
)

if [ -n "${TRAIN_GLOB:-}" ]; then
  FLAGS+=(-i "$TRAIN_GLOB")
else
  FLAGS+=(-blend "$BLEND")
fi

# srun: one task per GPU, block placement (consecutive ranks share a node), no GPU binding
# (each rank picks GPU local_rank, so NVLink peer access between the 8 ranks of a node works);
# --mpi=pmix: Open MPI's ranks find each other through Slurm's PMIx server (without it, on a
# cluster whose MpiDefault is none, every task would start alone and the trainer refuses)
LAUNCH=(srun --mpi="${SRUN_MPI:-pmix}" --nodes="$NODES" --ntasks="$WORLD" --ntasks-per-node="$GPUS_PER_NODE"
        --distribution=block:block --cpus-per-task=16 --cpu-bind=cores --kill-on-bad-exit=1)

if [ "${DRY_RUN:-0}" != "1" ] && [ -z "${SLURM_JOB_ID:-}" ]; then
  echo "run_mtnlg_530b.sh: submit with sbatch (or DRY_RUN=1 to check it here)" >&2
  exit 1
fi
llmc_launch
