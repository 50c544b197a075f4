#!/usr/bin/env bash
# plan_cp.sh: the planner's answer to "which context parallelism for the 530B model at long
# sequences, and what does it cost against none?". It asks `-plan` for the recommended layout
# (the fastest that fits the GPU with the headroom) with CP searched, then with -cp pinned to 1
# (no CP) and to every CP the search may use, and the recommended layout itself with -cp 1 (its
# CP ranks become DP ranks), and prints each one's layout, the links its groups take, memory
# per GPU and its activations, iteration time, bubble, the CP ring's transfers per iteration
# (exposed: on the critical path; moved: in all, on the slowest stage) and MFU; last, the fastest
# layout without recomputation with CP searched and without CP. The global batch keeps the
# paper's tokens per step (1920 x 2048 = 3.9M: 120 sequences of 32768). Every number is a
# PLANNER PREDICTION, not a measurement (doc/planner.md, "Context parallelism").
#
#   bash scripts/plan_cp.sh                   # needs ./train_gpt (make train_gpt)
#   SEQ=131072 GB=30 NODES=560 bash scripts/plan_cp.sh
#   (MODEL 530b, SEQ 32768, GB 120, CLUSTER h100, NODES 280, CPS "1 2 4 8 16 32": the pinned
#   rows, EXTRA: planner flags)
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${TRAIN_GPT:-./train_gpt}
[ -x "$BIN" ] || { echo "plan_cp.sh: $BIN is missing: run 'make train_gpt' first" >&2; exit 1; }
MODEL=${MODEL:-530b}
SEQ=${SEQ:-32768}
GB=${GB:-120}
CLUSTER=${CLUSTER:-h100}
NODES=${NODES:-280}
CPS=${CPS:-1 2 4 8 16 32}
EXTRA=${EXTRA:-}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# row LABEL [-cp N]: the recommended layout of one -plan run, found in its CSV
row() {
  local label="$1"
  shift
  # exit 1 (nothing feasible) still prints the reasons
  # shellcheck disable=SC2086
  "$BIN" -plan -model "$MODEL" -seq "$SEQ" -gb "$GB" -ramp off -cluster "$CLUSTER" -nodes "$NODES" "$@" $EXTRA \
    -plan-top 1 -plan-csv "$TMP/p.csv" > "$TMP/out.txt" 2>&1 || true
  [ -f "$TMP/p.csv" ] || { echo "plan_cp.sh: planner failed:"; cat "$TMP/out.txt"; exit 1; } >&2
  /usr/bin/python3 - "$TMP/p.csv" "$TMP/out.txt" "$label" "$TMP/flags" <<'EOF'
import csv, re, sys
path, out, label, flags = sys.argv[1:5]
text = open(out).read()
# -plan names CP in the line when CP is in play (given above 1 or searched)
m = re.search(r"recommended: TP (\d+)(?: x CP (\d+))? x PP (\d+) x DP (\d+), micro-batch (\d+), recompute (\S+), "
              r"SP (\d), V (\d+), schedule (\S+), ZeRO (\d)", text)
if not m:
    print(f"| {label} | none fits | | | | | | | |")
    sys.exit(0)
want = dict(zip(["tp", "cp", "pp", "dp", "mb", "rc_name", "sp", "vpp", "schedule", "zero"], m.groups()))
want["cp"] = want["cp"] or "1"
act = re.search(r"memory per GPU .*activations ([0-9.]+),", text).group(1)
rows = [r for r in csv.DictReader(open(path, newline="")) if r["feasible"] == "1" and
        all(r[k] == v for k, v in want.items())]
r = min(rows, key=lambda r: float(r["iter_s"]))
m_ = int(r["m"])
lay = (f"TP {r['tp']} CP {r['cp']:>2} PP {r['pp']:>2} DP {r['dp']:>2} mb {r['mb']} {r['rc_name']:>4} sp {r['sp']} "
       f"V {r['vpp']} z {r['zero']} {r['schedule']}")
links = f"{r['tp_link']}/{r['cp_link']}/{r['pp_link']}/{r['dp_link']}"
rc = {"full": "full", "sel": "selective", "0": "0"}[r["rc_name"]]
with open(flags, "w") as f:  # this layout's flags but CP, for the row without it
    f.write(f"-tp {r['tp']} -pp {r['pp']} -mb {r['mb']} -recompute {rc} -sp {r['sp']} -vpp {r['vpp']} "
            f"-zero {r['zero']} -pp-schedule {'zb-h1' if r['schedule'] == 'zb-h1' else '1f1b'}\n")
print(f"| {label} | {lay} | {links} | {float(r['mem_gib']):.1f} | {act} | {float(r['iter_s']):.2f} | "
      f"{100 * float(r['bubble_frac']):.1f}% | {m_ * float(r['slot_cp_s']):.2f} / {m_ * float(r['slot_ring_s']):.2f} | "
      f"{100 * float(r['mfu']):.1f}% |")
EOF
  rm -f "$TMP/p.csv"
}

echo "PLANNER PREDICTIONS: context parallelism, $MODEL at -seq $SEQ, $GB sequences per step, $NODES $CLUSTER nodes${EXTRA:+; $EXTRA}"
echo
echo "| variant | layout | TP/CP/PP/DP links | GiB/GPU | of it activations | s/iter | bubble | CP ring s/iter exposed / moved | MFU |"
echo "|---|---|---|---|---|---|---|---|---|"
row "CP searched: recommended"
# the same layout without CP: its CP ranks become DP ranks (more replicas, fewer micro-batches each)
read -r -a SAME < "$TMP/flags"
row "its layout with -cp 1" "${SAME[@]}" -cp 1
for c in $CPS; do
  if [ "$c" = 1 ]; then row "-cp 1 (no CP)" -cp 1; else row "-cp $c" -cp "$c"; fi
done
# what CP does to memory: the fastest layout that fits without recomputation, with and without CP
row "no recomputation, CP searched" -recompute 0
row "no recomputation, -cp 1" -recompute 0 -cp 1
