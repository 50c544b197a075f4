#!/usr/bin/env bash
# bench_cpu.sh: ms/step and GFLOP/s of the `125m` preset at micro-batch 4, sequence 64 on
# this machine, for train_gpt and, in the same run, the PyTorch baselines of dev/bench_torch.py
# (the same model shape in fp32 on the CPU with the same threads, timing forward + backward +
# clipping + AdamW). ROUNDS alternating rounds (default 3; each round runs every row once, the
# order rotated from round to round), so that a shared machine's drift hits every row alike.
# One table, side by side:
#   ms/step  each round's median over STEPS timed steps (after WARMUP_STEPS untimed ones);
#            the row shows the median over the rounds, and every round's value
#   tok/s    tokens per second at that median
#   GFLOP/s  the paper's model FLOPs per step, F = 24*f*B*s*L*H^2*(1 + s/(6H) + V/(16LH))
#            with f=3 and V the padded vocabulary (51200), over the median step time; the
#            same formula train_gpt logs, so every row counts the same work
#   vs       train_gpt's speed over this row's: the median of the rounds' ratios (each
#            round's two medians, measured minutes apart)
#
# The PyTorch rows:
#   PyTorch 2.x (TORCH2=1, the default; the headline ratio): PyTorch TORCH2_VERSION from PyPI in
#     its own venv TORCH2_VENV, installed on first use. Its CPU kernels are its own: MKL for
#     the GEMMs, oneDNN, ATen's vectorized code at the CPU's capability (AVX-512 where there
#     is one), and scaled_dot_product_attention; torch.set_num_threads = THREADS, the
#     trainer's. PyPI's Linux x86_64 torch links its CUDA libraries at import
#     (libtorch_cuda.so needs libcudart, cuBLAS, cuDNN, NCCL, cuFile...), so `pip install
#     --no-deps torch` does not import ("libcufile.so.0: cannot open shared object file",
#     measured with 2.15.0), and pip brings the CUDA wheels too: ~3 GB to download, ~5.5 GB
#     in the venv, ~1.5 min on the development machine; they are never used on the CPU.
#     PyTorch's CPU-only wheels are on its own package index, not PyPI: where that index
#     can be reached, TORCH2_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu'
#     installs those instead (~200 MB). Not part of `make test`, so dev/install.sh does not
#     install it. TORCH2=0 skips the row.
#   PyTorch 1.13 + OpenBLAS: Debian's python3-torch (PY) with OpenBLAS's libblas.so.3 first
#     on LD_LIBRARY_PATH (OPENBLAS_DIR, by default where Debian's libopenblas0-pthread puts
#     it); the baseline of earlier runs. To get OpenBLAS without changing the system:
#       apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb /tmp/ob
#       OPENBLAS_DIR=/tmp/ob/usr/lib/x86_64-linux-gnu/openblas-pthread bash dev/bench_cpu.sh
#   PyTorch 1.13, system BLAS (TORCH_SYSTEM=1, round 1 only): libblas.so.3 as the system's
#     alternatives have it, netlib's reference BLAS unless an optimised one is installed.
#
# Variables (environment): TRAIN_GPT PY MODEL SEQ MB STEPS WARMUP_STEPS THREADS OUT DATA ROUNDS
# TORCH2 TORCH2_VERSION TORCH2_VENV TORCH2_PIP_ARGS OPENBLAS_DIR TORCH_SYSTEM SYSTEM_STEPS
# SYSTEM_WARMUP_STEPS FORCE_AVX2 (0 skips the AVX2 row on an AVX-512 machine)
# TABLE_ONLY=1 (re-print the table of the last run in $OUT)
set -euo pipefail

TRAIN_GPT=${TRAIN_GPT:-./train_gpt}
PY=${PY:-/usr/bin/python3}                 # Debian's python3 with python3-torch (1.13)
MODEL=${MODEL:-125m}
SEQ=${SEQ:-64}
MB=${MB:-4}
STEPS=${STEPS:-7}                          # timed steps (odd: the median is one real step)
WARMUP_STEPS=${WARMUP_STEPS:-2}            # untimed steps first
THREADS=${THREADS:-$(nproc)}
OUT=${OUT:-out/bench_cpu}
DATA=${DATA:-dev/data/kjv}                 # token ids < 8192, valid for V=50257
ROUNDS=${ROUNDS:-3}                        # alternating rounds of every row
TORCH2=${TORCH2:-1}                        # 1: the PyTorch 2.x row (installed on first use)
TORCH2_VERSION=${TORCH2_VERSION:-2.15.0}
TORCH2_VENV=${TORCH2_VENV:-$HOME/.cache/llmc/torch2-venv}
TORCH2_PIP_ARGS=${TORCH2_PIP_ARGS:-}
OPENBLAS_DIR=${OPENBLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}
TORCH_SYSTEM=${TORCH_SYSTEM:-0}           # 1: also time PyTorch on libblas.so.3 as the system has it
SYSTEM_STEPS=${SYSTEM_STEPS:-1}            # netlib BLAS: ~1 minute a step for 125m, so one
SYSTEM_WARMUP_STEPS=${SYSTEM_WARMUP_STEPS:-0}  # (its time is all in the BLAS: no warm-up effect)
FORCE_AVX2=${FORCE_AVX2:-1}

TABLE_ONLY=${TABLE_ONLY:-0}                # 1: only re-print the table from the files in $OUT

print_table() {
"$PY" - "$OUT" "$WARMUP_STEPS" "$MODEL" "$SEQ" "$MB" "$THREADS" <<'EOF_PY'
import glob, json, os, re, statistics, sys
out, warm, model, seq, mb, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]


def rounds(prefix):
    """{round: path} of one row's files, e.g. train_gpt_r2.jsonl."""
    got = {}
    for p in glob.glob(os.path.join(out, prefix + "_r*.json*")):
        m = re.fullmatch(re.escape(prefix) + r"_r(\d+)\.jsonl?", os.path.basename(p))
        if m and os.path.getsize(p) > 0:
            got[int(m.group(1))] = p
    return got


def trainer_round(p):
    st = [r for r in (json.loads(l) for l in open(p)) if r.get("type") == "train"][warm:]
    if not st:
        return None
    return {"ms": statistics.median(r["ms"] for r in st), "tok_s": statistics.median(r["tok_s"] for r in st),
            "gflops": statistics.median(r["tflops"] * 1e3 for r in st), "best": min(r["ms"] for r in st),
            "steps": len(st), "what": ""}


def torch_round(p):
    r = json.loads(open(p).read().strip().splitlines()[-1])
    return {"ms": r["ms_median"], "tok_s": r["tok_s"], "gflops": r["gflops"], "best": r["ms_min"], "steps": r["steps"],
            "what": f"{r['impl']}: BLAS {r.get('blas_info', '?')}, CPU capability {r.get('cpu_capability', '?')}, "
                    f"attention {r.get('attention', 'manual')}, {r.get('torch_threads', r['threads'])} threads; "
                    f"BLAS-named libraries mapped: {r.get('blas', '?')}"}


rows = []  # (name, {round: result})
for prefix, name, reader in (("train_gpt", "train_gpt (C, fp32, OpenMP)", trainer_round),
                             ("train_gpt_avx2", "train_gpt, LLMC_CPU_ISA=avx2", trainer_round),
                             ("torch2", "PyTorch %s (PyPI: MKL, oneDNN)", torch_round),
                             ("torch_openblas", "PyTorch %s + OpenBLAS", torch_round),
                             ("torch_system", "PyTorch %s, system BLAS", torch_round)):
    res = {k: reader(p) for k, p in sorted(rounds(prefix).items())}
    res = {k: v for k, v in res.items() if v}
    if res:
        if "%s" in name:
            impl = json.loads(open(rounds(prefix)[min(res)]).read().strip().splitlines()[-1])["impl"]
            name = name % impl.split()[-1]
            print(f"{prefix}: {next(iter(res.values()))['what']}")
        rows.append((prefix, name, res))
if not rows or rows[0][0] != "train_gpt":
    sys.exit("bench_cpu.sh: train_gpt logged no timed steps")
ceil = {}
for core in ("auto", "SkylakeX", "Haswell"):
    got = []
    for phase in ("pre", "post"):
        p = os.path.join(out, "sgemm_%s_%s.json" % (core, phase))
        if os.path.exists(p) and os.path.getsize(p) > 0:
            got.append(json.loads(open(p).read()))
    if got:
        ceil[core] = max(got, key=lambda r: r["gflops"])
        ceil[core]["best"] = max(r.get("gflops_best", r["gflops"]) for r in got)
        runs = " / ".join(f"{r['gflops']:.1f}" for r in got)
        print(f"sgemm 2048^3 (numpy, OpenBLAS core {ceil[core]['corename']}, OPENBLAS_CORETYPE={core}): {runs} GFLOP/s (before / after; ceiling {ceil[core]['gflops']:.1f})")
base = rows[0][2]


def speedup(res):
    """How many times as fast as this row train_gpt is (this row's ms / train_gpt's ms): the
    median of the per-round ratios, and those ratios."""
    rs = [v["ms"] / base[k]["ms"] for k, v in res.items() if k in base]
    return (statistics.median(rs) if rs else float("nan")), rs


def row_values(res):
    ms = statistics.median(v["ms"] for v in res.values())
    return (ms, statistics.median(v["tok_s"] for v in res.values()), statistics.median(v["gflops"] for v in res.values()),
            min(v["best"] for v in res.values()))


nround = max(len(res) for _, _, res in rows)
print(f"\n{model}, micro-batch {mb}, sequence {seq}, V 50257 (padded 51200), fp32, {threads} threads, "
      f"{nround} alternating round(s)")
for prefix, name, res in rows[1:]:
    if prefix.startswith("torch"):
        m, rs = speedup(res)
        print(f"train_gpt vs {name}: {m:.2f}x as fast (median of the rounds' ratios of ms/step: "
              f"{', '.join(f'{r:.2f}' for r in rs)})")
print(f"| {'implementation':<40} | {'rounds':>6} | {'ms/step':>9} | {'per round':>26} | {'tok/s':>7} | {'GFLOP/s':>7} | {'train_gpt vs this':>17} |")
print(f"|{'-'*42}|{'-'*7}:|{'-'*10}:|{'-'*27}:|{'-'*8}:|{'-'*8}:|{'-'*18}:|")
table = []
for prefix, name, res in rows:
    ms, toks, gf, best = row_values(res)
    m, _ = speedup(res)
    per = " / ".join(f"{v['ms']:.0f}" for v in res.values())
    print(f"| {name:<40} | {len(res):>6} | {ms:>9.1f} | {per:>26} | {toks:>7.1f} | {gf:>7.2f} | {m:>16.2f}x |")
    table.append((name, ms, gf, best))
# the ceilings: the best OpenBLAS sgemm of all measured, and its AVX2 kernel's
c512 = max([ceil[c]["gflops"] for c in ("auto", "SkylakeX") if c in ceil] or [0])
c2 = ceil["Haswell"]["gflops"] if "Haswell" in ceil else 0
b512 = max([ceil[c]["best"] for c in ("auto", "SkylakeX") if c in ceil] or [0])
b2 = ceil["Haswell"]["best"] if "Haswell" in ceil else 0
if c512 or c2:
    # median step vs median sgemm (the headline); and, because the shared machine's speed
    # drifts, fastest step vs fastest sgemm: noise only adds time, so both minima estimate
    # the undisturbed speed
    print()
    print("| vs the sgemm ceiling measured in this run | GFLOP/s | ceiling GFLOP/s | fraction | fastest step GFLOP/s | fastest sgemm | fraction |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ms, gf, best in table:
        # the forced-AVX2 row against the AVX2 kernel; every other row against the best
        # sgemm measured (on an AVX2-only machine "auto" and Haswell are both AVX2 kernels)
        c = c2 if "avx2" in name and c2 else max(c512, c2)
        cb = b2 if "avx2" in name and b2 else max(b512, b2)
        gb = gf * ms / best
        print(f"| {name} | {gf:.2f} | {c:.1f} | {gf / c:.0%} | {gb:.2f} | {cb:.1f} | {gb / cb:.0%} |")
EOF_PY
}
if [ "$TABLE_ONLY" = "1" ]; then print_table; exit 0; fi

for f in "$TRAIN_GPT" "$DATA/kjv_train_000.bin" dev/bench_torch.py; do
  [ -e "$f" ] || { echo "bench_cpu.sh: $f is missing: run 'make train_gpt' and 'make data' first" >&2; exit 1; }
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench_cpu.sh: ROUNDS must be a whole number >= 1 (got '$ROUNDS')" >&2; exit 1;; esac

# --- PyTorch 2.x from PyPI in its own venv, on first use (see the header for why with CUDA) --
TORCH2_PY="$TORCH2_VENV/bin/python"
torch2_ready() {
  "$TORCH2_PY" -c "import sys, numpy, torch; sys.exit(torch.__version__.split('+')[0] != '$TORCH2_VERSION')" 2>/dev/null
}
if [ "$TORCH2" = "1" ] && ! torch2_ready; then
  echo "bench_cpu.sh: installing PyTorch $TORCH2_VERSION from PyPI into $TORCH2_VENV (once): pip brings its CUDA"
  echo "  wheels too, ~3 GB to download, ~5.5 GB on disk, ~2 min (TORCH2=0 skips this row; the header says why)"
  if ! { /usr/bin/python3 -m venv "$TORCH2_VENV" &&
         "$TORCH2_PY" -m pip install -q --disable-pip-version-check $TORCH2_PIP_ARGS "torch==$TORCH2_VERSION" numpy &&
         torch2_ready; }; then
    echo "bench_cpu.sh: could not install PyTorch $TORCH2_VERSION into $TORCH2_VENV: the PyTorch 2.x row is skipped." >&2
    echo "  By hand: python3 -m venv $TORCH2_VENV && $TORCH2_PY -m pip install torch==$TORCH2_VERSION numpy" >&2
    TORCH2=0
  fi
fi

mkdir -p "$OUT"
rm -f "$OUT"/train_gpt*.jsonl "$OUT"/train_gpt*.out "$OUT"/torch*.json "$OUT"/sgemm_*.json

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), nproc $(nproc); threads $THREADS; AVX-512: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); AVX2+FMA: $(grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && echo yes || echo no)"
echo "uptime: $(uptime)"
t_start=$(date +%s)

# --- the sgemm ceiling: numpy (on OpenBLAS) 2048^3, median of 5 -------------------------
# OpenBLAS picks its kernels from cpuid; 0.3.21 does not know every CPU (under KVM this
# Sapphire Rapids-class Xeon is taken for "Prescott", an SSE3 kernel), so the ceiling is
# also measured with its AVX-512 (SkylakeX) and AVX2 (Haswell) kernels forced, and the
# best is the ceiling for each ISA. Measured before the rounds and again after them (the
# machine is shared: its speed drifts over a run); the larger of the two is the ceiling.
measure_ceiling() { # pre|post
for core in auto SkylakeX Haswell; do
  if [ "$core" = SkylakeX ] && ! grep -qw avx512f /proc/cpuinfo; then continue; fi
  echo "load: $(cat /proc/loadavg)   sgemm OPENBLAS_CORETYPE=$core ($1)"
  env $( [ "$core" = auto ] || echo OPENBLAS_CORETYPE=$core ) OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS \
    "$PY" - "$core" > "$OUT/sgemm_${core}_$1.json" <<'EOF_SG'
import ctypes, ctypes.util, json, statistics, sys, time
import numpy as np
core = sys.argv[1]
name = "?"
try:
    for lib in ("libopenblas.so.0", "libopenblasp-r0.3.21.so"):
        try:
            ob = ctypes.CDLL(lib); ob.openblas_get_corename.restype = ctypes.c_char_p
            name = ob.openblas_get_corename().decode(); break
        except OSError:
            pass
except Exception:
    pass
n = 2048
a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
a @ b
ts = []
for _ in range(5):
    t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
print(json.dumps({"core": core, "corename": name, "gflops": 2 * n**3 / statistics.median(ts) / 1e9,
                  "gflops_best": 2 * n**3 / min(ts) / 1e9}))
EOF_SG
  cat "$OUT/sgemm_${core}_$1.json"
done
}

# --- the rows: each one run per round -------------------------------------------------------
# train_gpt: one micro-batch per step (global batch = micro-batch, no ramp)
cmd=("$TRAIN_GPT" -model "$MODEL" -seq "$SEQ" -V 50257 -vpad 1024
     -mb "$MB" -gb "$MB" -ramp off
     -i "$DATA/kjv_train_*.bin" -val-samples 0 -val-every 0
     -steps $((WARMUP_STEPS + STEPS)) -threads "$THREADS")
torch_args=(dev/bench_torch.py -model "$MODEL" -seq "$SEQ" -mb "$MB" -V 50257 -vpad 1024
            -threads "$THREADS" -data "$DATA")
row_train_gpt() { # round
  echo "+ ${cmd[*]} -log $OUT/train_gpt_r$1.jsonl"
  "${cmd[@]}" -log "$OUT/train_gpt_r$1.jsonl" > "$OUT/train_gpt_r$1.out"
  grep '^step' "$OUT/train_gpt_r$1.out" || true
}
row_train_gpt_avx2() { # round: the AVX2 micro-kernels forced (what an AVX2-only machine computes)
  echo "+ LLMC_CPU_ISA=avx2 ${cmd[*]} -log $OUT/train_gpt_avx2_r$1.jsonl"
  LLMC_CPU_ISA=avx2 "${cmd[@]}" -log "$OUT/train_gpt_avx2_r$1.jsonl" > "$OUT/train_gpt_avx2_r$1.out"
  grep '^step' "$OUT/train_gpt_avx2_r$1.out" || true
}
row_torch2() { # round
  echo "+ $TORCH2_PY ${torch_args[*]} -steps $STEPS -warmup-steps $WARMUP_STEPS   (PyTorch $TORCH2_VERSION)"
  OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$TORCH2_PY" "${torch_args[@]}" -steps "$STEPS" \
    -warmup-steps "$WARMUP_STEPS" > "$OUT/torch2_r$1.json"
}
row_torch_openblas() { # round
  echo "+ LD_LIBRARY_PATH=$OPENBLAS_DIR $PY ${torch_args[*]} -steps $STEPS -warmup-steps $WARMUP_STEPS   (OpenBLAS)"
  LD_LIBRARY_PATH="$OPENBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS \
    "$PY" "${torch_args[@]}" -steps "$STEPS" -warmup-steps "$WARMUP_STEPS" > "$OUT/torch_openblas_r$1.json"
}
row_torch_system() { # round
  echo "+ $PY ${torch_args[*]} -steps $SYSTEM_STEPS -warmup-steps $SYSTEM_WARMUP_STEPS   (system BLAS)"
  OMP_NUM_THREADS=$THREADS "$PY" "${torch_args[@]}" -steps "$SYSTEM_STEPS" -warmup-steps "$SYSTEM_WARMUP_STEPS" \
    > "$OUT/torch_system_r$1.json"
}
rows=(train_gpt)
if grep -qw avx512f /proc/cpuinfo && [ "$FORCE_AVX2" = "1" ]; then rows+=(train_gpt_avx2); fi
if [ "$TORCH2" = "1" ]; then rows+=(torch2); fi
if [ -e "$OPENBLAS_DIR/libblas.so.3" ]; then rows+=(torch_openblas)
else echo "(no OpenBLAS at $OPENBLAS_DIR: the PyTorch 1.13 + OpenBLAS row is skipped)"; fi

measure_ceiling pre
for ((r = 1; r <= ROUNDS; r++)); do
  n=${#rows[@]}
  for ((i = 0; i < n; i++)); do  # round r starts at row r-1: every row takes every position
    row=${rows[$(( (i + r - 1) % n ))]}
    echo "load: $(cat /proc/loadavg)   round $r/$ROUNDS: $row"
    "row_$row" "$r"
  done
done
if [ "$TORCH_SYSTEM" = "1" ]; then echo "load: $(cat /proc/loadavg)"; row_torch_system 1; fi
echo "load after: $(cat /proc/loadavg)"
measure_ceiling post
echo "bench wall time: $(( $(date +%s) - t_start )) s"

# --- the table ---------------------------------------------------------------------------
print_table
