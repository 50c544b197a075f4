# shellcheck shell=bash
# wave5_lib.sh: what family_wave5.sh and family_wave5_stop.sh share (sourced after lib.sh): the
# binaries, a tiny -cp 2 -zero 3 run on 2 ranks and helpers to compare runs and checkpoints. Ends the
# family with a failed setup case when mpirun, the corpus or the test-only mutant is missing.
export OMP_NUM_THREADS=1
KJV="$ROOT/dev/data/kjv/kjv_train_000.bin"
MUT="${MUT:-$ROOT/build/mutants/train_gpt_ckpt_points}"
CUTRAIN="${CUTRAIN:-$ROOT/build/cuda-emu/train_gpt_cu}"
PY="${PY:-python3}"
FORGE="$ROOT/tests/attack/ckpt_forge.py"
MPI=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
C=("$TRAIN" -check)
# one step of the tiny model at seq 32 on 2 ranks: ~0.1 s
S=(-model tiny -seq 32 -V 8192 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1 -i "$KJV")
CPZ=(-cp 2 -zero 3)

losses() { grep '"type":"train"' "$1/log.jsonl" | sed 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/'; }
# same_ckpt A B: both complete, every rank file byte-identical, the same number of files
same_ckpt() {
  local a=$1 b=$2 f n=0
  [ -f "$a/DONE" ] && [ -f "$b/DONE" ] || return 1
  for f in "$b"/rank_*.bin; do cmp -s "$f" "$a/$(basename "$f")" || return 1; n=$((n + 1)); done
  [ "$n" -ge 1 ] && [ "$n" -eq "$(ls "$a"/rank_*.bin | wc -l)" ]
}
# close_losses A B TOL FROM: steps >= FROM of run dirs A and B, the same steps, each loss within
# relative TOL (0: equal as printed); at least one step
close_losses() {
  awk -v tol="$3" -v from="$4" 'NR == FNR { if ($1 >= from) want[$1] = $2; next }
    $1 >= from { n++; if (!($1 in want)) bad = 1; d = $2 - want[$1]; if (d < 0) d = -d;
      if ((tol == 0 && $2 != want[$1]) || (tol > 0 && d > tol * want[$1])) bad = 1; seen[$1] = 1 }
    END { for (s in want) if (!(s in seen)) bad = 1; exit (bad || n < 1) }' <(losses "$1") <(losses "$2")
}
# every ckpt_N directory (not .tmp/.old) holds DONE
all_done() { local k; for k in "$1"/ckpt_*; do case "$k" in *.tmp | *.old) continue ;; esac; [ -f "$k/DONE" ] || return 1; done; }
no_partial() { ! compgen -G "$1/ckpt_*.tmp" > /dev/null && ! compgen -G "$1/ckpt_*.old" > /dev/null; }
# pids of this script's trainer processes writing -o DIR (comm holds 15 characters of the name)
tg_pids() { pgrep -f -- "-o $1( |$)" | while read -r p; do case "$(cat /proc/"$p"/comm 2> /dev/null)" in train_gpt*) echo "$p" ;; esac; done; }
ntrain() { local n; n=$(grep -c '"type":"train"' "$1" 2> /dev/null); echo "${n:-0}"; }
wait_steps() { local i=0; while [ "$i" -lt 600 ]; do [ "$(ntrain "$1")" -ge "$2" ] && return 0; sleep 0.05; i=$((i + 1)); done; return 1; }
# a verdict from a condition string (eval'd)
verdict() { if eval "$2"; then pass "$1"; else fail "$1" "${3:-condition false}"; fi; }

if ! command -v mpirun > /dev/null || [ ! -f "$KJV" ] || [ ! -x "$MUT" ]; then
  fail "setup" "mpirun, $KJV or $MUT missing (bash dev/install.sh; make data build/mutants/train_gpt_ckpt_points)"
  attack_done
  exit 1
fi
