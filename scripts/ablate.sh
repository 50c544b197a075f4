#!/usr/bin/env bash
# ablate.sh: ablation studies of the recipe's stability claims, a grid of arms x seeds through the trainer.
#
#   scripts/ablate.sh STUDY [options]
#
# STUDY is beta2, init, ramp, allocation or grad_reduce (the specs in dev/ablate/*.json), or a path to a spec
# of your own. Every arm runs every seed in its own directory, OUT/ARM/seedN, with its own -o;
# then dev/ablate_report.py writes OUT/report.md with figures (OUT/report/*.png) and OUT/summary.json.
# A killed study, rerun, skips the finished runs and resumes the unfinished ones (-o DIR -resume);
# a run directory holding a run of other flags is refused, never overwritten.
#
#   beta2       C3: beta2 0.95 / 0.99 / 0.999 x LR 1, 2, 4, 8 x the -lr auto value; spikes, final loss
#   init        C4: init std 0.5, 1, 2, 4 x sqrt(1/(3H)), scaled output init off / on (-init-std-mult)
#   ramp        C5: the paper's batch ramp (scaled to the study's batch), no ramp, -ramp auto; equal tokens
#   allocation  a fixed compute C = 6ND at 0.5, 2, 5, 20 tokens per parameter; loss at equal FLOPs
#   grad_reduce the DP gradient reduction in fp32 or bf16 (-grad-reduce), ZeRO-1 over DP 2
#
# Options:
#   --scale tiny|small|smoke   the shape (tiny: the trainer's preset, 1.9M parameters; small: L 6,
#                              H 256, 6.9M; smoke: for tests); default: the spec's (tiny; allocation small)
#   --L N --H N --heads N --seq N   your own shape, over the scale's
#   --tokens N                 tokens per run (allocation: the budget C = 6 x N(scale) x N tokens)
#   --gb N                     final global batch, sequences
#   --seeds N | a,b,c          N seeds (1..N) or a list; default 3 (2 with --smoke)
#   --data GLOB --val GLOB --V N   your own train and validation shards and vocabulary (default: KJV)
#   --mpirun N                 ranks per run under mpirun (default 2 when mpirun is found, so that
#                              the gradient noise scale B_simple is logged (DP >= 2); else 1)
#   --launch 'PREFIX'          the launcher instead of mpirun, e.g. 'srun -n 8' (give --mpirun N too:
#                              the world size the flags are validated for)
#   --trainer PATH             the trainer (default ./train_gpt; ./train_gpt_cu for a GPU)
#   --check-bin PATH           the CPU trainer that validates flags and reads -lr auto (./train_gpt)
#   --out DIR                  default out/ablate/STUDY (out/ablate/STUDY_smoke with --smoke)
#   --jobs J                   runs at a time (default 1; more on a machine with room for them)
#   --arms REGEX               only the arms whose name matches
#   --extra 'FLAGS'            more trainer flags for every run (e.g. '-skip-spikes 4': the live guard)
#   --smoke                    the smoke shape, 2 seeds, 8 steps per run (tests; make test runs beta2)
#   --dry-run                  validate every arm, print each run's state and command, run nothing
#   --no-report                runs only; the report alone: python3 dev/ablate_report.py OUT
#
# The defaults of beta2 finish on 2 CPU cores in under an hour (doc/stability.md has the measurement).
# Exit status: 0 every run finished; 1 a run failed or was refused; 2 a bad argument; 4 stopped by a
# signal (the trainers saved: rerun the same command to resume). How to read the report, the spike
# definition and the claims: doc/stability.md.
set -euo pipefail
ROOT="${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
for a in "$@"; do
  case "$a" in
    -h | --help) source "$ROOT/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" -h ;;
  esac
done
PY=${PY:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
exec "$PY" "$ROOT/dev/ablate.py" "$@"
