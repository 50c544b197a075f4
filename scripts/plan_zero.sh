#!/usr/bin/env bash
# plan_zero.sh: the planner's answer to "with ZeRO-3 (weights, gradients and optimizer state
# sharded over DP), which of the paper's layouts need fewer pipeline stages (less bubble) or no
# recomputation, and at what cost in time?". For 530B (global batch 1920) on 280 and 420 nodes
# and for 6.7b (gb 960) and 1.3b (gb 480) on one 8-GPU node, on the selene-a100 and h100
# clusters, it prints per variant the fastest feasible layout (fits the GPU's memory) with its
# memory per GPU, iteration time, bubble and MFU, or why none is. The 530B variants keep the
# paper's family (TP 8, micro-batch 1, no SP, 1F1B) where they say so; "best" searches
# everything (TP, PP, DP, micro-batch, recomputation, SP, V, schedule). ZeRO <= 1 is what the
# trainers ran before ZeRO-2/3; ZeRO-3 pins -zero 3. Every number is a PLANNER PREDICTION, not
# a measurement (doc/planner.md, "ZeRO-2 and ZeRO-3").
#
#   bash scripts/plan_zero.sh                 # needs ./train_gpt (make train_gpt)
#   CLUSTERS=h100 EXTRA="-plan-eff 0.73" bash scripts/plan_zero.sh
#   (CLUSTERS: planner presets; EXTRA: planner flags)
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${TRAIN_GPT:-./train_gpt}
[ -x "$BIN" ] || { echo "plan_zero.sh: $BIN is missing: run 'make train_gpt' first" >&2; exit 1; }
CLUSTERS=${CLUSTERS:-selene-a100 h100}
EXTRA=${EXTRA:-}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# table MODEL GB NODES CLUSTER KIND: every layout the planner evaluates (one -plan run, all
# searched), then the variants' rows (KIND paper: the 530B rows; small: the one-node rows)
table() {
  local model="$1" gb="$2" nodes="$3" cluster="$4" kind="$5"
  # exit 1 (nothing feasible) still writes the CSV with the reasons
  # shellcheck disable=SC2086
  "$BIN" -plan -model "$model" -gb "$gb" -ramp off -cluster "$cluster" -nodes "$nodes" -plan-top 0 $EXTRA \
    -plan-csv "$TMP/p.csv" > "$TMP/out.txt" 2>&1 || true
  [ -f "$TMP/p.csv" ] || { echo "plan_zero.sh: planner failed:"; cat "$TMP/out.txt"; exit 1; } >&2
  /usr/bin/python3 - "$TMP/p.csv" "$model" "$nodes" "$cluster" "$kind" <<'EOF'
import csv, sys
path, model, nodes, cluster, kind = sys.argv[1:6]
rows = [r for r in csv.DictReader(open(path, newline="")) if r["m"] != ""]  # shape/batch failures have no time
I = lambda r, k: int(r[k])
paper = lambda r: I(r, "tp") == 8 and I(r, "mb") == 1 and I(r, "sp") == 0 and r["schedule"] == "1f1b"
low = lambda r: I(r, "zero") <= 1
z3 = lambda r: I(r, "zero") == 3
full = lambda r: r["rc_name"] == "full"
none = lambda r: r["rc_name"] == "0"
pure_dp = lambda r: I(r, "tp") == 1 and I(r, "pp") == 1


def line(label, sel, pick="fastest"):
    ok = [r for r in rows if r["feasible"] == "1" and sel(r)]
    if pick == "fewest stages" and ok:
        least = min(I(r, "pp") for r in ok)
        ok = [r for r in ok if I(r, "pp") == least]
    if pick == "largest micro-batch" and ok:
        most = max(I(r, "mb") for r in ok)
        ok = [r for r in ok if I(r, "mb") == most]
    where = f"{model} {cluster} {nodes}"
    if not ok:
        why = sorted({r["reason"] for r in rows if sel(r)})[:1]
        print(f"| {where} | {label} | infeasible: {'; '.join(why) or 'no layout'} | | | | |")
        return
    r = min(ok, key=lambda r: float(r["iter_s"]))
    lay = (f"TP {r['tp']} PP {r['pp']:>2} DP {r['dp']:>2} mb {r['mb']} {r['rc_name']:>4} sp {r['sp']} V {r['vpp']} "
           f"z {r['zero']} {r['schedule']}")
    print(f"| {where} | {label} | {lay} | {float(r['mem_gib']):.1f} | {float(r['iter_s']):.2f} | "
          f"{100 * float(r['bubble_frac']):.1f}% | {100 * float(r['mfu']):.1f}% |")


if kind == "paper":
    p35 = lambda r: paper(r) and I(r, "pp") == 35 and full(r)
    line("paper: TP 8 PP 35, full recompute, ZeRO 0", lambda r: p35(r) and I(r, "zero") == 0)
    line("the same, ZeRO-3", lambda r: p35(r) and z3(r))
    line("paper's family, full recompute, fewest stages: ZeRO <= 1", lambda r: paper(r) and full(r) and low(r),
         "fewest stages")
    line("the same, ZeRO-3", lambda r: paper(r) and full(r) and z3(r), "fewest stages")
    line("paper's family, no recompute, fewest stages: ZeRO <= 1", lambda r: paper(r) and none(r) and low(r),
         "fewest stages")
    line("the same, ZeRO-3", lambda r: paper(r) and none(r) and z3(r), "fewest stages")
else:
    line("pure DP, no recompute, largest micro-batch: ZeRO <= 1", lambda r: pure_dp(r) and none(r) and low(r),
         "largest micro-batch")
    line("the same, ZeRO-3", lambda r: pure_dp(r) and none(r) and z3(r), "largest micro-batch")
line("best, ZeRO <= 1", low)
line("best, ZeRO-3", z3)
line("best, ZeRO 0-3 searched", lambda r: True)
EOF
  rm -f "$TMP/p.csv"
}

echo "PLANNER PREDICTIONS: ZeRO-3 against ZeRO <= 1 (the fastest layout that fits each variant${EXTRA:+; $EXTRA})"
echo
echo "| model, cluster, nodes | variant | layout | GiB/GPU | s/iter | bubble | MFU |"
echo "|---|---|---|---|---|---|---|"
for c in $CLUSTERS; do
  for n in 280 420; do table 530b 1920 "$n" "$c" paper; done
done
for c in $CLUSTERS; do
  table 6.7b 960 1 "$c" small
  table 1.3b 480 1 "$c" small
done
