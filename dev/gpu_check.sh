#!/usr/bin/env bash
# dev/gpu_check.sh: the one GPU check of the CUDA trainer, sized for 8 minutes on one H200 with
# 16 cores (a bare machine: CUDA toolkit and PyTorch present, MPI maybe not, no network).
# Stages, in order, with the PREDICTED time of each on 16 cores + H200 (no GPU run yet; the
# build's 2-arch time measured on 2 shared CPU cores here was 114 s wall):
#   1. build      ~90 s  train_gpt (CPU reference), train_gpt_cu, test_gpt_cu, check_attention
#                        for this GPU's arch only (nvidia-smi compute_cap, else
#                        __nvcc_device_query), make -j all cores, CUDA_WERROR=0 (a newer
#                        toolkit's warning must not turn the check into SKIPs; CI keeps -Werror).
#                        NCCL/cuDNN found by dev/cuda/find_libs.sh (toolkit, system, wheels)
#   2. attention  ~20 s  dev/cuda/check_attention --large: head sizes 64, 128, 160 at T = 2048
#                        against the fp64 CPU reference (the 1.3b..530b shapes); then (~15 s)
#                        build/cuda/cudnn_attention: cuDNN against the own flash kernel, timed
#   3. tests      ~120 s PyTorch fixtures, then test_gpt_cu (bf16 tolerances, CPU trainer, resume)
#   4. sanitizer  ~60 s  compute-sanitizer memcheck and racecheck on a tiny 2-step run
#   5. bench      ~120 s 1.3b at sequence 2048: train_gpt_cu and PyTorch (eager, compiled), both
#                        from the trainers' initial weights (-seed 1337; PyTorch -init llmc) on the
#                        same synthetic shard in order (-shuffle 0), constant LR; each PyTorch row
#                        compares step-1 losses (relative 2e-2, bf16): "losses agree" or FAIL
#                        "LOSSES DIFFER"
#   5b. profile   ~60 s  ncu kernel durations of a 1-step and a 2-step 1.3b run (their
#                        difference is one step) by kernel class, beside the cost model's
#                        per-class PREDICTION (dev/cuda/kernel_times.py); SKIP without ncu
#   6. layouts    ~60 s  tiny preset: 1x1x1 against 2x2x2 zero-1 -comm mpi (8 ranks, one GPU)
#   7. kernels    ~60 s  the other dev/cuda kernel checks on the GPU, if time is left
# QUICK=1 (3 min): build, attention, tests, sanitizer memcheck, the train_gpt_cu benchmark only.
# Status words: PASS, FAIL, TIMEOUT (the stage ran out of its time), SKIP (not run, with the
# reason). ONE table is printed last, also when a stage or a summary step fails (EXIT trap);
# it lists what one GPU cannot exercise (NCCL between ranks). A global deadline
# (GPU_CHECK_BUDGET, 470 s; QUICK=1: 175 s) caps each stage's timeout. Exit status 0 when no
# stage FAILed or TIMED OUT. Logs in $GPU_CHECK_OUT (default /tmp/llmc_gpu_check).
#
# Environment: GPU_CHECK_OUT, GPU_CHECK_BUDGET (s), QUICK, BENCH_MB (4), BENCH_GB (16),
# BENCH_STEPS (6), PEAK (bf16 dense TFLOP/s; default from the GPU name), GPU_CHECK_APT=1 (try
# apt-get install openmpi when mpirun is missing), SKIP_TORCH=1, SKIP_KERNELS=1.
# GPU_CHECK_FAKE="stage:rc,...": a dry run without GPU or toolkit (dev/test_gpu_check.sh):
# every stage command is replaced by one that exits with the given code (default 0; 124 is a
# timeout); GPU_CHECK_FAKE_SUMMARY_FAIL=1 makes the benchmark summary step fail;
# GPU_CHECK_FAKE_ABORT=STAGE kills the script after STAGE; GPU_CHECK_FAKE_MPI=1,
# GPU_CHECK_FAKE_SANITIZER=0, GPU_CHECK_FAKE_NCU=0 pretend mpirun is there / compute-sanitizer,
# ncu are not;
# GPU_CHECK_FAKE_CUDA_LOSS, GPU_CHECK_FAKE_TORCH_LOSS set the fake step-1 losses (10.9876, 10.9912;
# an empty TORCH_LOSS: no loss to compare).
set -uo pipefail # no -e: a failing stage or summary step must not stop the table
cd "$(dirname "$0")/.."
OUT=${GPU_CHECK_OUT:-/tmp/llmc_gpu_check}
QUICK=${QUICK:-0}
BUDGET=${GPU_CHECK_BUDGET:-$([ "$QUICK" = 1 ] && echo 175 || echo 470)}
FAKE=${GPU_CHECK_FAKE-}
FAKE_ON=0; [ -n "${GPU_CHECK_FAKE+set}" ] && FAKE_ON=1
mkdir -p "$OUT"
T_START=$(date +%s)
RESULTS="$OUT/results.tsv"; : > "$RESULTS"
BENCH="$OUT/bench.tsv"; : > "$BENCH"
FAILED=0
GPU_NAME=""; CC_CAP=""; PEAK=${PEAK:-}; MB=${BENCH_MB:-4}; GB=${BENCH_GB:-16}

elapsed() { echo $(( $(date +%s) - T_START )); }
log() { echo "[gpu_check $(elapsed)s] $*"; }
record() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RESULTS"; case $2 in FAIL|TIMEOUT) FAILED=1 ;; esac
    # GPU_CHECK_FAKE_ABORT=STAGE: the script dies right after STAGE (the table must still print)
    if [ $FAKE_ON = 1 ] && [ "${GPU_CHECK_FAKE_ABORT:-}" = "$1" ]; then echo "fake abort after $1"; exit 9; fi
}
# the exit code a fake stage returns (GPU_CHECK_FAKE="name:rc,...")
fake_rc() { local kv; for kv in ${FAKE//,/ }; do [ "${kv%%:*}" = "$1" ] && { echo "${kv#*:}"; return; }; done; echo 0; }
# run_stage NAME CAP_S CMD...: runs CMD with timeout min(CAP, time left), output to
# $OUT/NAME.log. Returns CMD's status (124/137: timed out); 125 when no time was left.
run_stage() {
    local name=$1 cap=$2; shift 2
    local left=$(( BUDGET - $(elapsed) ))
    local t=$(( cap < left ? cap : left ))
    if [ $t -lt 15 ]; then log "$name: no time left in the ${BUDGET}s budget"; echo "no time left in the ${BUDGET}s budget" > "$OUT/$name.log"; return 125; fi
    log "$name (timeout ${t}s)"
    local rc=0
    if [ $FAKE_ON = 1 ]; then
        rc=$(fake_rc "$name"); echo "fake $name: exit $rc" > "$OUT/$name.log"
        [ "$rc" = 0 ] && echo "1 passed, 0 failed" >> "$OUT/$name.log"
    else
        timeout --kill-after=10 "$t" "$@" > "$OUT/$name.log" 2>&1 || rc=$?
    fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then log "$name TIMED OUT after ${t}s"; echo "TIMED OUT after ${t}s" >> "$OUT/$name.log"; fi
    tail -n 3 "$OUT/$name.log" | sed "s/^/    /"
    return $rc
}
# the status word for a stage's return code
status_of() { case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; 125) echo SKIP ;; *) echo FAIL ;; esac; }
# the last "N passed, M failed" line of a log, and its first FAIL lines
verdict() { { grep -E 'passed, [0-9]+ failed' "$1" | tail -n 1; grep -m 2 '^FAIL' "$1"; } 2>/dev/null | tr '\n' ';' ; }

# ---------------------------------------------------------------------------------------
# the table: printed on every exit (EXIT trap), whatever failed before
print_table() {
    local rc=$?
    echo
    echo "=================================================================================================="
    echo "GPU check: ${GPU_NAME:-unknown GPU} (sm_${CC_CAP:-?}), peak ${PEAK:-?} TFLOP/s bf16 dense, $(elapsed)s of ${BUDGET}s$([ "$QUICK" = 1 ] && echo ', QUICK=1')"
    echo "--------------------------------------------------------------------------------------------------"
    printf '%-20s %-7s %s\n' stage status detail
    while IFS=$'\t' read -r s st d; do printf '%-20s %-7s %s\n' "$s" "$st" "$d"; done < "$RESULTS"
    if [ -s "$BENCH" ]; then
        echo "--------------------------------------------------------------------------------------------------"
        echo "1.3b, seq 2048, micro-batch $MB, global batch $GB; median step after 2 warm-up steps"
        printf '%-40s %9s %9s %8s %7s %8s\n' implementation ms/step tokens/s TFLOP/s MFU loss
        while IFS=$'\t' read -r name ms toks tf mfu loss; do
            printf '%-40s %9s %9s %8s %7s %8s\n' "$name" "$ms" "$toks" "$tf" "$mfu" "$loss"
        done < "$BENCH"
    fi
    if grep -q '^MEASURED' "$OUT/profile.log" 2>/dev/null; then
        echo "--------------------------------------------------------------------------------------------------"
        sed -n '/^MEASURED/,$p' "$OUT/profile.log"
    fi
    echo "--------------------------------------------------------------------------------------------------"
    echo "NOT exercised here: NCCL between ranks (one GPU: the layouts stage uses -comm mpi; -comm nccl"
    echo "across GPUs needs 2+), multi-node; cuDNN attention only if the build found cuDNN (row cudnn)."
    echo "=================================================================================================="
    [ $rc = 0 ] && rc=$FAILED
    exit $rc
}
trap print_table EXIT

# ---------------------------------------------------------------------------------------
# 0. environment
if [ $FAKE_ON = 1 ]; then
    NVCC=fake-nvcc; GPU_NAME="FAKE GPU (GPU_CHECK_FAKE)"; CC_CAP=90; PEAK=${PEAK:-989}; PY=/usr/bin/python3
    HAVE_MPI=${GPU_CHECK_FAKE_MPI:-0}; SANITIZER=$([ "${GPU_CHECK_FAKE_SANITIZER:-1}" = 1 ] && echo fake-compute-sanitizer)
    NCU=$([ "${GPU_CHECK_FAKE_NCU:-1}" = 1 ] && echo fake-ncu)
else
NVCC=$(command -v nvcc || true)
if [ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; fi
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
CC_CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ' || true)
# the toolkit's own probe when nvidia-smi is missing: it prints e.g. "sm_90"
if [ -z "$CC_CAP" ] && [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/__nvcc_device_query" ]; then
    CC_CAP=$("$(dirname "$NVCC")/__nvcc_device_query" 2>/dev/null | grep -o '[0-9][0-9]*' | head -n 1 || true)
fi
[ -n "$CC_CAP" ] || CC_CAP=90
if [ -z "${PEAK:-}" ]; then
    case "$GPU_NAME" in
        *H100*PCIe*) PEAK=756 ;;
        *H200*|*H100*|*H800*) PEAK=989 ;;
        *A100*|*A800*) PEAK=312 ;;
        *) PEAK=0 ;;
    esac
fi
PY=""
for p in python3 /usr/bin/python3 python; do
    if command -v "$p" > /dev/null 2>&1 && "$p" -c "import torch" > /dev/null 2>&1; then PY=$(command -v "$p"); break; fi
done
if ! command -v mpirun > /dev/null 2>&1 && [ "${GPU_CHECK_APT:-0}" = 1 ] && command -v apt-get > /dev/null 2>&1; then
    log "mpirun missing: trying apt-get install openmpi (60 s cap)"
    timeout 60 apt-get install -y -q openmpi-bin libopenmpi-dev > "$OUT/apt.log" 2>&1 || log "apt-get failed (no network?): continuing without MPI"
fi
HAVE_MPI=0
if command -v mpirun > /dev/null 2>&1 && command -v mpicxx > /dev/null 2>&1; then HAVE_MPI=1; fi
SANITIZER=$(command -v compute-sanitizer || true)
[ -n "$SANITIZER" ] || { [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] && SANITIZER=$(dirname "$NVCC")/compute-sanitizer; } || true
NCU=$(command -v ncu || true)
[ -n "$NCU" ] || NCU=$(ls -d "$(dirname "${NVCC:-/x/x}")/ncu" /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1 || true)
fi
log "GPU: ${GPU_NAME:-unknown} (sm_$CC_CAP, peak $PEAK TFLOP/s); nvcc: ${NVCC:-none}; python with torch: ${PY:-none}; compute-sanitizer: ${SANITIZER:-none}; ncu: ${NCU:-none}"
MPICXX=mpicxx
[ $HAVE_MPI = 1 ] || MPICXX=/nonexistent/mpicxx
JOBS=$(nproc 2>/dev/null || echo 4)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
MAKE_CUDA=(make -j"$JOBS" -f dev/cuda/cuda.mk NVCC="$NVCC" CUDA_ARCHS="$CC_CAP" CUDA_MPICXX="$MPICXX" CUDA_WERROR=0)

# helper scripts
cat > "$OUT/synth.py" <<'EOF'
# a llm.c token shard (V = 50257): a learnable pattern with 20% noise
import struct, sys
import numpy as np
n = int(sys.argv[2])
rng = np.random.default_rng(99)
i = np.arange(n, dtype=np.int64)
tok = (i * 7 + i // 13) % 50257
noise = rng.random(n) < 0.2
tok[noise] = rng.integers(0, 50257, int(noise.sum()))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(tok.astype("<u2").tobytes())
EOF
cat > "$OUT/cmp_layouts.py" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"type":"train"' in l] for p in sys.argv[1:3])
assert len(a) == len(b) == 10, (len(a), len(b))
wl = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
wg = max(abs(x["gnorm"] - y["gnorm"]) / abs(x["gnorm"]) for x, y in zip(a, b))
print("1x1x1 vs 2x2x2 zero-1 -comm mpi, 10 steps: worst loss rel %.2e, grad norm rel %.2e (step 10 loss %.5f vs %.5f)"
      % (wl, wg, a[-1]["loss"], b[-1]["loss"]))
sys.exit(0 if wl <= 1e-2 and wg <= 5e-2 else 1)
EOF
cat > "$OUT/cmp_loss.py" <<'EOF'
# step-1 loss of train_gpt_cu (JSONL log) against PyTorch's (bench_torch_gpu.py -init llmc -data: the
# same initial weights and the same samples). Exit 0 agree, 1 differ, 2 not comparable.
# Tolerance: relative 2e-2. Both round every matmul input to bf16 (8 mantissa bits: 2^-9 = 2e-3
# relative per element) and differ in kernels and in the order of fp32 accumulation; through 24
# layers and a 50257-way softmax the loss moves by far less than that per-element error (the mean
# over gb x 2048 tokens averages it), so 2e-2 leaves a wide margin for bf16 and still catches a
# wrong model, loss, vocabulary, attention mask or kernel (those move the loss by 1e-1 and more).
# It does NOT prove equal weights: at init the loss is ~ln(V) whatever the draw (two seeds differ by
# ~5e-3 at a small shape); dev/test_bench_torch_init.py proves that on the CPU (bit for bit).
import json, sys
try:
    c = [json.loads(l) for l in open(sys.argv[1]) if '"type":"train"' in l]
    x = [r["loss"] for r in c if r["step"] == 1][0]
    t = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
    y = t["losses"][0]
except Exception as e:
    print("step-1 loss not compared (%s: %s)" % (type(e).__name__, e)); sys.exit(2)
rel = abs(x - y) / max(abs(x), 1e-30)
last = ""
n = len(t["losses"])
if n > 1 and len(c) >= n:  # after n - 1 updates: informative only (bf16 differences grow)
    last = "; step %d: %.4f vs %.4f, rel %.1e" % (n, c[n - 1]["loss"], t["losses"][-1], abs(c[n - 1]["loss"] - t["losses"][-1]) / abs(c[n - 1]["loss"]))
ok = rel <= 2e-2
print("%s (step 1: train_gpt_cu %.4f vs pytorch %.4f, rel %.1e%s)" % ("losses agree" if ok else "LOSSES DIFFER", x, y, rel, last))
sys.exit(0 if ok else 1)
EOF
cat > "$OUT/summarize.py" <<'EOF'
# one table row from a train_gpt_cu JSONL log (median step after the first 2) or a bench_torch_gpu.py line
import json, statistics, sys
name, path = sys.argv[1], sys.argv[2]
lines = [l for l in open(path) if l.startswith("{")]
if '"type"' in lines[0]:
    rows = [json.loads(l) for l in lines if '"type":"train"' in l]
    rows = rows[2:] if len(rows) > 3 else rows
    ms = statistics.median(r["ms"] for r in rows)
    r = min(rows, key=lambda r: abs(r["ms"] - ms))
    tok_s, tf, mfu, loss = r["tok_s"], r["tflops"], r.get("mfu"), rows[-1]["loss"]
else:
    j = json.loads(lines[-1])
    name = name + " (" + j["impl"] + ")"
    ms, tok_s, tf, mfu, loss = j["ms"], j["tok_s"], j["tflops"], j.get("mfu"), j["loss"]
print("%s\t%.1f\t%.0f\t%.1f\t%s\t%.4f" % (name, ms, tok_s, tf, "%.1f%%" % (100 * mfu) if mfu is not None else "n/a", loss))
EOF

# one benchmark row; a failing summary step gives a row that says so
summarize() {
    local row
    if [ $FAKE_ON = 1 ]; then
        [ "${GPU_CHECK_FAKE_SUMMARY_FAIL:-0}" = 1 ] && row="" || row=$(printf '%s\t1.0\t1\t1.0\tn/a\t1.0' "$1")
    else
        row=$("$PY" "$OUT/summarize.py" "$1" "$2" 2> "$OUT/summary.err") || row=""
    fi
    [ -n "$row" ] || row=$(printf '%s\tsummary failed (%s)\t\t\t\t' "$1" "$(basename "$2")")
    echo "$row" >> "$BENCH"
}
# ---------------------------------------------------------------------------------------
# 1. build (only this GPU's arch, all cores, warnings allowed; CI builds sm_80 and sm_90 with -Werror)
BUILD_OK=0
if [ -z "$NVCC" ]; then
    record build FAIL "nvcc not found: install the CUDA toolkit (or put nvcc on PATH)"
else
    rc=0
    run_stage build 200 bash -c "set -e
        make -j$JOBS -f Makefile train_gpt train_gpt_nompi
        ${MAKE_CUDA[*]} cuda-libs cuda-build build/cuda/check_attention
        ./train_gpt_cu -check" || rc=$?
    [ $rc = 0 ] && BUILD_OK=1
    record build "$(status_of $rc)" "train_gpt_cu + test_gpt_cu + check_attention for sm_$CC_CAP, warnings allowed; MPI: $([ $HAVE_MPI = 1 ] && echo yes || echo 'no (single-process build)'); $(grep -m 1 '^NCCL' "$OUT/build.log" | cut -c1-80) ($OUT/build.log)"
fi
NOBUILD="no build (stage build did not pass)"

# ---------------------------------------------------------------------------------------
# 2. tensor-core attention at the big presets' shapes
if [ $BUILD_OK = 1 ]; then
    rc=0
    run_stage attention 90 build/cuda/check_attention --large || rc=$?
    record attention "$(status_of $rc)" "check_attention --large (hs 64/128/160, T 2048): $(verdict "$OUT/attention.log")"
else
    record attention SKIP "$NOBUILD"
fi
# 2b. cuDNN fused attention against the own flash kernel (built by cuda-build when cuDNN is found)
if [ $BUILD_OK = 1 ] && [ -x build/cuda/cudnn_attention ]; then
    rc=0
    run_stage cudnn 60 build/cuda/cudnn_attention || rc=$?
    record cudnn "$(status_of $rc)" "cuDNN vs own flash, hs 64/128/160, T 2048: $(verdict "$OUT/cudnn.log"); $(grep -c '^BENCH' "$OUT/cudnn.log" 2>/dev/null) timings in $OUT/cudnn.log"
else
    record cudnn SKIP "$([ $BUILD_OK = 1 ] && echo 'the build has no cuDNN (make cuda-libs says what was found)' || echo "$NOBUILD")"
fi

# ---------------------------------------------------------------------------------------
# 3. fixtures + test_gpt_cu
if [ $BUILD_OK = 1 ] && [ -n "$PY" ]; then
    rc=0
    run_stage fixtures 60 "$PY" dev/train_gpt.py --out fixtures || rc=$?
    if [ $rc = 0 ]; then
        rc=0
        export LLMC_TEST_LAYOUTS=0 # the layouts stage runs them on the tiny preset
        run_stage tests 180 ./test_gpt_cu fixtures || rc=$?
        record tests "$(status_of $rc)" "test_gpt_cu: $(verdict "$OUT/tests.log")"
    else
        record tests "$(status_of $rc)" "PyTorch fixtures not written ($OUT/fixtures.log)"
    fi
else
    record tests SKIP "$([ $BUILD_OK = 1 ] && echo 'no python with torch for the fixtures' || echo "$NOBUILD")"
fi

# synthetic data for the sanitizer, the layouts and the benchmark
DATA="$OUT/synth_000.bin"
if [ $FAKE_ON = 1 ]; then : > "$DATA"; elif [ -n "$PY" ] && [ ! -f "$DATA" ]; then "$PY" "$OUT/synth.py" "$DATA" 2000000 || true; fi
TINY="-model tiny -mb 1 -gb 8 -ramp off -lr 1e-3 -warmup 0 -decay 1000000000 -tokens 1000000000000 -i $DATA -j '' -seed 5"

# ---------------------------------------------------------------------------------------
# 4. compute-sanitizer on a tiny 2-step run: memcheck (out of bounds, misaligned), racecheck (shared memory)
for tool in memcheck racecheck; do
    name=sanitizer_$tool
    if [ "$tool" = racecheck ] && [ "$QUICK" = 1 ]; then record $name SKIP "QUICK=1"; continue; fi
    if [ $BUILD_OK != 1 ] || [ ! -f "$DATA" ]; then record $name SKIP "$NOBUILD or no data"; continue; fi
    if [ -z "$SANITIZER" ]; then record $name SKIP "compute-sanitizer not found"; continue; fi
    rc=0
    run_stage $name 90 bash -c "'$SANITIZER' --tool $tool --error-exitcode 3 ./train_gpt_cu $TINY -steps 2" || rc=$?
    record $name "$(status_of $rc)" "tiny, 2 steps: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$name.log" | tail -n 1)$( [ $rc = 3 ] && echo ' (errors found)')"
done

# ---------------------------------------------------------------------------------------
# 5. benchmark: 1.3b at sequence 2048
STEPS=${BENCH_STEPS:-6}; [ "$QUICK" = 1 ] && STEPS=${BENCH_STEPS:-3}
if [ $BUILD_OK = 1 ] && [ -f "$DATA" ]; then
    # the same recipe as bench_torch_gpu.py: constant LR (no warmup, decay far away), the shard read
    # in order (-shuffle 0), the same seed for the initial weights (-init llmc -seed on the PyTorch side)
    BSEED=1337; BLR=1e-4
    BARGS=(-model 1.3b -mb "$MB" -gb "$GB" -ramp off -lr $BLR -warmup 0 -decay 1000000000000 -tokens 10000000000000 -i "$DATA" -j '' -shuffle 0 -seed $BSEED -peak "$PEAK")
    rc=0
    run_stage bench_cuda 150 ./train_gpt_cu "${BARGS[@]}" -steps $((STEPS + 2)) -log "$OUT/bench_cuda.jsonl" || rc=$?
    # fake mode: a step-1 loss for the comparison below
    [ $FAKE_ON = 1 ] && printf '{"type":"train","step":1,"loss":%s}\n' "${GPU_CHECK_FAKE_CUDA_LOSS:-10.9876}" > "$OUT/bench_cuda.jsonl"
    CUDA_OK=$([ $rc = 0 ] && echo 1 || echo 0)
    [ $rc = 0 ] && summarize "train_gpt_cu (tensor-core attention)" "$OUT/bench_cuda.jsonl"
    record bench_cuda "$(status_of $rc)" "1.3b seq 2048, mb $MB, gb $GB ($OUT/bench_cuda.log)"
    if [ "${SKIP_TORCH:-0}" != 1 ] && [ "$QUICK" != 1 ]; then
        for mode in 0 1; do
            name=bench_torch_$([ $mode = 1 ] && echo compiled || echo eager)
            cap=90; [ $mode = 1 ] && cap=240
            rc=0
            run_stage "$name" "$cap" "$PY" dev/bench_torch_gpu.py -model 1.3b -mb "$MB" -gb "$GB" \
                -steps "$STEPS" -warmup-steps 2 -compile $mode -peak "$PEAK" \
                -init llmc -seed $BSEED -data "$DATA" -lr $BLR || rc=$?
            [ $FAKE_ON = 1 ] && printf '{"impl":"pytorch fake","losses":[%s]}\n' "${GPU_CHECK_FAKE_TORCH_LOSS-10.9912}" >> "$OUT/$name.log"
            [ $rc = 0 ] && summarize "pytorch" "$OUT/$name.log"
            st=$(status_of $rc); cmp="step-1 loss not compared (train_gpt_cu did not pass)"
            if [ $rc = 0 ] && [ "$CUDA_OK" = 1 ]; then
                crc=0; cmp=$("$PY" "$OUT/cmp_loss.py" "$OUT/bench_cuda.jsonl" "$OUT/$name.log" 2>&1 | tail -n 1) || crc=$?
                [ $crc = 1 ] && st=FAIL # a real disagreement; 2 (not comparable) stays PASS with the reason
            elif [ $rc != 0 ]; then cmp="$(tail -n 1 "$OUT/$name.log" | cut -c1-100)"
            fi
            record "$name" "$st" "$cmp; $(grep '^{' "$OUT/$name.log" | tail -n 1 | cut -c1-60)"
        done
    fi
    # the CUDA-core flash attention, for the attention kernels' share of the step
    if [ "$QUICK" = 1 ]; then record bench_cuda_flash SKIP "QUICK=1"; else
    rc=0
    run_stage bench_cuda_flash 90 env LLMC_ATTENTION=flash ./train_gpt_cu "${BARGS[@]}" -steps 4 -log "$OUT/bench_cuda_flash.jsonl" || rc=$?
    [ $rc = 0 ] && summarize "train_gpt_cu (CUDA-core attention)" "$OUT/bench_cuda_flash.jsonl"
    record bench_cuda_flash "$(status_of $rc)" "LLMC_ATTENTION=flash ($OUT/bench_cuda_flash.log)"
    fi
else
    record bench SKIP "$NOBUILD or no data"
fi

# ---------------------------------------------------------------------------------------
# 5b. profile: each kernel class's measured time per step (Nsight Compute, kernel durations
# only, clocks left alone; one step = the 2-step run minus the 1-step run) beside the cost
# model's per-class prediction (dev/cuda/costmodel_pred.tsv from make cuda-costmodel)
PGPU=H200; case "$GPU_NAME" in *H100*) PGPU=H100 ;; esac
if [ "$QUICK" = 1 ]; then
    record profile SKIP "QUICK=1"
elif [ $BUILD_OK = 1 ] && [ -f "$DATA" ] && [ -n "$NCU" ]; then
    { echo 'set -e'
      printf 'NCU=%q; PYK=%q; OUTD=%q\nARGS=(' "$NCU" "${PY:-python3}" "$OUT"; printf ' %q' "${BARGS[@]}"; echo ' )'
      echo 'for n in 1 2; do'
      echo '    "$NCU" --clock-control none --csv --print-units base --print-kernel-base function --metrics gpu__time_duration.sum \'
      echo '        --log-file "$OUTD/ncu_step$n.csv" ./train_gpt_cu "${ARGS[@]}" -steps "$n" > "$OUTD/ncu_run$n.log" 2>&1'
      echo 'done'
      echo "\"\$PYK\" dev/cuda/kernel_times.py --one \"\$OUTD/ncu_step1.csv\" --two \"\$OUTD/ncu_step2.csv\" --pred dev/cuda/costmodel_pred.tsv --gpu $PGPU"
    } > "$OUT/profile.sh"
    rc=0
    run_stage profile 100 bash "$OUT/profile.sh" || rc=$?
    record profile "$(status_of $rc)" "$( [ $rc = 0 ] && tail -n 1 "$OUT/profile.log" || echo "ncu failed or timed out ($OUT/profile.log, $OUT/ncu_run1.log, ncu_run2.log)")"
else
    record profile SKIP "$([ -n "$NCU" ] && echo "$NOBUILD or no data" || echo 'ncu (Nsight Compute) not found: no measured per-kernel times')"
fi

# ---------------------------------------------------------------------------------------
# 6. layouts: tiny preset, 1x1x1 vs 2x2x2 zero-1 -comm mpi on the one GPU
if [ "$QUICK" = 1 ]; then
    record layouts SKIP "QUICK=1"
elif [ $BUILD_OK = 1 ] && [ $HAVE_MPI = 1 ] && [ -f "$DATA" ]; then
    ROOTFLAG=""; [ "$(id -u)" = 0 ] && ROOTFLAG="--allow-run-as-root"
    rc=0
    run_stage layouts 150 bash -c "set -e
        rm -f $OUT/l111.jsonl $OUT/l222.jsonl
        ./train_gpt_cu $TINY -steps 10 -log $OUT/l111.jsonl
        mpirun --oversubscribe $ROOTFLAG -x OMP_NUM_THREADS=1 -np 8 ./train_gpt_cu $TINY -steps 10 -tp 2 -pp 2 -dp 2 -zero 1 -comm mpi -log $OUT/l222.jsonl
        '$PY' $OUT/cmp_layouts.py $OUT/l111.jsonl $OUT/l222.jsonl" || rc=$?
    record layouts "$(status_of $rc)" "tiny: $(tail -n 1 "$OUT/layouts.log")"
else
    record layouts SKIP "$([ $HAVE_MPI = 1 ] && echo "$NOBUILD or no data" || echo 'mpirun/mpicxx not found: the 8-rank 2x2x2 run was NOT done (install Open MPI; GPU_CHECK_APT=1 tries apt-get)')"
fi

# ---------------------------------------------------------------------------------------
# 7. kernel checks, with what time is left
if [ "$QUICK" = 1 ]; then
    record kernels SKIP "QUICK=1"
elif [ $BUILD_OK = 1 ] && [ "${SKIP_KERNELS:-0}" != 1 ]; then
    rc=0
    run_stage kernels 150 bash -c "set -e
        ${MAKE_CUDA[*]} cuda-check-build
        fails=0
        for c in build/cuda/check_*; do
            case \$c in *.out|*/check_attention) continue ;; esac # stage attention ran check_attention
            a=""
            echo \"== \$c \$a\"; \$c \$a > \$c.out 2>&1 || fails=1; grep -E '^FAIL|passed' \$c.out || true
        done
        exit \$fails" || rc=$?
    record kernels "$(status_of $rc)" "$(grep -h 'passed, ' build/cuda/*.out 2>/dev/null | awk '{p+=$1; f+=$3} END {printf "%d passed, %d failed", p, f}') over $(find build/cuda -maxdepth 1 -name 'check_*' ! -name '*.out' 2>/dev/null | wc -l) checks"
else
    record kernels SKIP "$([ $BUILD_OK = 1 ] && echo SKIP_KERNELS=1 || echo "$NOBUILD")"
fi

