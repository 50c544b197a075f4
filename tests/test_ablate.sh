#!/usr/bin/env bash
# test_ablate.sh: scripts/ablate.sh end to end on the smoke scale, and the offline spike rule
# (dev/spikes.py) against the live guard. `make test` runs it; ~30 s on 2 cores.
#   - `ablate.sh beta2 --smoke` (12 arms x 2 seeds) finishes and writes the report and its figures;
#     the report's final validation loss of every arm is the median [min, max] of its runs' last val records,
#     parsed here from the logs; a rerun runs nothing; a run directory of other flags is refused;
#   - a study stopped by SIGTERM (exit 4) resumes from the trainer's checkpoint when rerun, and its
#     log then holds every step once;
#   - spike rule: two runs with the live guard on (a burst planted by a high LR, z 3; and scattered
#     skips at z 0.5), window 12: the steps dev/spikes.py flags are exactly the steps the trainer
#     skipped (the expected values come from the trainer's log, the offline code is under test);
#     a copy of spikes.py whose window also takes the flagged values must disagree.
# One line per check, then "N passed, M failed"; exit status 1 if any failed.
#   bash tests/test_ablate.sh          # needs ./train_gpt (make train_gpt) and the KJV data (make data)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
TRAIN=./train_gpt
PY=/usr/bin/python3
for f in "$TRAIN" dev/data/kjv/kjv_train_000.bin; do
  [ -e "$f" ] || { echo "test_ablate.sh: $f is missing: run 'make train_gpt data' first" >&2; exit 1; }
done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok()  { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    | /' "$2" | tail -n 12; fail=$((fail + 1)); }
t_start=$(date +%s)

# --- the smoke study, its report, a rerun
S="$TMP/beta2"
t0=$(date +%s)
if bash scripts/ablate.sh beta2 --smoke --out "$S" --jobs 2 > "$TMP/smoke.log" 2>&1; then
  ok "ablate.sh beta2 --smoke: 24 runs and the report in $(( $(date +%s) - t0 )) s"
else bad "ablate.sh beta2 --smoke: exit status" "$TMP/smoke.log"; fi
n=$(grep -c ': done in ' "$TMP/smoke.log")
[ "$n" -eq 24 ] && ok "24 runs done" || bad "24 runs done (got $n)" "$TMP/smoke.log"
missing=""
for f in report.md summary.json study.json report/curves.png report/spikes.png; do
  [ -s "$S/$f" ] || missing+=" $f"
done
if command -v mpirun > /dev/null; then [ -s "$S/report/bsimple.png" ] || missing+=" report/bsimple.png (DP 2)"; fi
[ -z "$missing" ] && ok "the report, its figures and summary exist" || bad "missing:$missing"
grep -q '^\*\*C3\*\* ' "$S/report.md" && ok "the report states C3's sentence" || bad "no C3 sentence" "$S/report.md"

# the report's numbers from the logs, parsed independently: per arm the median [min, max] of the runs' last val loss
"$PY" - "$S" > "$TMP/numbers.log" 2>&1 <<'PYEOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
want = {}
for log in sorted(glob.glob(os.path.join(out, "*", "seed*", "log.jsonl"))):
    arm = log.split(os.sep)[-3]
    last = None
    for line in open(log):
        r = json.loads(line)
        if r.get("type") == "val": last = r["val_loss"]
    want.setdefault(arm, []).append(last)
got = {}
for line in open(os.path.join(out, "report.md")):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 9 and cells[0] in want: got[cells[0]] = cells[2]
bad = 0
for arm, vals in sorted(want.items()):
    w = "%.4f [%.4f, %.4f]" % (statistics.median(vals), min(vals), max(vals))
    if len(vals) != 2 or got.get(arm) != w:
        bad += 1
        print("arm %s: report %s, logs %s (%s)" % (arm, got.get(arm), w, vals))
print("%d arms compared, %d differ" % (len(want), bad))
sys.exit(1 if bad or len(want) != 12 else 0)
PYEOF
if [ $? -eq 0 ]; then
  ok "report: each arm's final val loss = median [min, max] of its runs' last val ($(tail -n 1 "$TMP/numbers.log"))"
else bad "report numbers against the logs" "$TMP/numbers.log"; fi

t0=$(date +%s)
bash scripts/ablate.sh beta2 --smoke --out "$S" --no-report > "$TMP/rerun.log" 2>&1
if [ "$(grep -c ': done$' "$TMP/rerun.log")" -eq 24 ] && ! grep -q ': .*done in ' "$TMP/rerun.log"; then
  ok "a rerun skips the 24 finished runs ($(( $(date +%s) - t0 )) s)"
else bad "a rerun skips the finished runs" "$TMP/rerun.log"; fi
d="$S/beta2-0.95_lr-x1/seed1"
sum=$(md5sum "$d/log.jsonl")
bash scripts/ablate.sh beta2 --smoke --out "$S" --arms 'beta2-0.95_lr-x1$' --seeds 1 --tokens 2048 \
  > "$TMP/other.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "holds a run with other flags" "$TMP/other.log" && [ "$(md5sum "$d/log.jsonl")" = "$sum" ]
then ok "a run directory of other flags is refused (exit 1), its log untouched"
else bad "a run directory of other flags is refused (exit $rc)" "$TMP/other.log"; fi

# --- stopped by a signal, then resumed: 100 steps, single process, SIGTERM to the process group after step 5
R="$TMP/resume"
args=(beta2 --smoke --out "$R" --arms 'beta2-0.95_lr-x1$' --seeds 1 --tokens 12800 --mpirun 1 --no-report)
setsid bash scripts/ablate.sh "${args[@]}" > "$TMP/stop.log" 2>&1 &
pid=$!
log="$R/beta2-0.95_lr-x1/seed1/log.jsonl"
for _ in $(seq 600); do
  n=$(grep -c '"type":"train"' "$log" 2> /dev/null)
  [ "${n:-0}" -ge 5 ] && break
  sleep 0.05
done
kill -TERM -- "-$pid" 2> /dev/null
wait "$pid"
rc=$?
if [ $rc -eq 4 ] && compgen -G "$R/beta2-0.95_lr-x1/seed1/ckpt_*/DONE" > /dev/null; then
  ok "SIGTERM stops the study (exit 4) after a checkpoint"
else bad "SIGTERM stops the study (exit $rc, want 4, and a checkpoint)" "$TMP/stop.log"; fi
bash scripts/ablate.sh "${args[@]}" > "$TMP/resume.log" 2>&1
rc=$?
"$PY" - "$log" > "$TMP/steps.log" 2>&1 <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in recs if r.get("type") == "train"]
resumed = sum(1 for r in recs if r.get("event") == "resume")
print("steps %d..%d (%d records), %d resume event(s)" % (steps[0], steps[-1], len(steps), resumed))
sys.exit(0 if steps == list(range(1, 101)) and resumed == 1 else 1)
PYEOF
src=$?
if [ $rc -eq 0 ] && grep -q 'resumed, done' "$TMP/resume.log" && [ $src -eq 0 ]; then
  ok "the rerun resumes it (-o DIR -resume) to the end: $(cat "$TMP/steps.log")"
else bad "the rerun resumes the stopped run (exit $rc)" "$TMP/resume.log"; cat "$TMP/steps.log"; fi

# --- the spike rule: the offline detector flags exactly the steps the live guard skipped
cp dev/spikes.py "$TMP/spikes_mutant.py"
sed -i 's/^\( *\)\(return "spike", stats\)  # a flagged step never enters the window$/\1self._push(loss, gnorm)\n\1\2/'\
  "$TMP/spikes_mutant.py"
if cmp -s dev/spikes.py "$TMP/spikes_mutant.py"; then bad "the mutant of dev/spikes.py could not be made"; fi
mutant_caught=0
spike_case() {  # ID NAME LR Z STEPS
  local id="$1" name="$2" dir="$TMP/spike_$1"
  "$TRAIN" -L 2 -H 64 -heads 2 -seq 64 -V 8192 -lr "$3" -gb 8 -mb 8 -ramp off -tokens 100000 -steps "$5" \
    -warmup 512 -decay 100000 -j '' -skip-spikes "$4" -spike-window 12 -spike-stop 0 -threads 1 -seed 1337 \
    -o "$dir" > "$dir.out" 2>&1 || { bad "spike run $name" "$dir.out"; return; }
  local live offline mutant accepted_after
  live=$("$PY" -c 'import json, sys
print(" ".join(str(r["step"]) for r in map(json.loads, open(sys.argv[1])) if r.get("skip")))' "$dir/log.jsonl")
  accepted_after=$("$PY" -c 'import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
k = next((i for i, r in enumerate(t) if r.get("skip")), len(t))
print(sum(1 for r in t[k:] if not r.get("skip")))' "$dir/log.jsonl")
  offline=$("$PY" dev/spikes.py --flagged "$dir/log.jsonl")
  mutant=$("$PY" "$TMP/spikes_mutant.py" --flagged "$dir/log.jsonl")
  if [ "$(wc -w <<< "$live")" -ge 3 ] && [ "$accepted_after" -ge 3 ] && [ "$offline" = "$live" ]; then
    ok "spike rule, $name: offline flags = the live guard's skips [$live] ($accepted_after accepted after the first)"
  else bad "spike rule, $name: live [$live], offline [$offline], $accepted_after accepted after the first skip"; fi
  [ "$mutant" != "$live" ] && mutant_caught=1
  echo "     the mutant (flagged values enter the window) flags [$mutant]"
}
spike_case burst "a burst (lr 3e-3, z 3)" 3e-3 3 40
spike_case scattered "scattered skips (lr 1e-3, z 0.5)" 1e-3 0.5 60
[ $mutant_caught -eq 1 ] && ok "the mutant of the rule (flagged values enter the window) is caught" \
  || bad "the mutant of the rule (flagged values enter the window) is NOT caught"

echo "test_ablate.sh: $(( $(date +%s) - t_start )) s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
