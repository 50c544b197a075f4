#!/usr/bin/env bash
# dev/gpu_check.sh: the one prepared GPU run of the CUDA trainer, sized for a borrowed H200
# (16 cores, no network, no MPI, NCCL and cuDNN from Python wheels, ~15 minutes in all).
#
#   bash dev/gpu_check.sh --plan        the stages, their caps and what each measures; exits
#   bash dev/gpu_check.sh               the run (doc/gpu_check.md has the exact device command)
#   bash dev/gpu_check.sh --rehearsal   the same script on a CPU: the CUDA code under cuemu
#                                       at tiny shapes, stand-ins for nvidia-smi, compute-sanitizer
#                                       and ncu (make gpu-rehearsal)
#
# Stages run in order of value (the table STAGES below): build; the 1.3b benchmark (cuDNN
# attention, then the own tensor-core attention, then PyTorch eager from the same weights);
# correctness (attention kernels, fixtures, test_gpt_cu); compute-sanitizer on the own kernels;
# ncu on one step; PyTorch compiled last. Each stage has a cap; a global deadline
# (GPU_CHECK_BUDGET, 420 s with the build) cuts the later ones. Status words: PASS, FAIL,
# TIMEOUT (the stage ran out of its time), SKIP (not run, with the reason). Exit status 1 when
# a stage FAILed, else 0: a TIMEOUT or SKIP is reported, not counted as a failure.
#
# Logs go to GPU_CHECK_WORK (build/gpu_check/work). After every stage and on any exit (also
# SIGTERM/SIGINT) the table and all logs are packed into GPU_CHECK_OUT (default: $OUT, the
# folder the device machine sends back; else build/gpu_check/out): gpu_check_table.txt,
# gpu_check_results.tsv, gpu_check_logs.tgz. Three files, so nothing is lost to the
# device's limit on what comes back, even when the run is killed.
#
# Environment: GPU_CHECK_OUT, GPU_CHECK_WORK, GPU_CHECK_BUDGET (s), GPU_CHECK_ONLY (stage
# names, comma-separated: the build and these only, for a rerun), BENCH_MB (4), BENCH_GB (16),
# BENCH_STEPS (6 timed after 2 warm-up), PEAK (bf16 dense TFLOP/s; default from the GPU name).
# Test hooks: GPU_CHECK_PLANT="stage:hang,stage:fail" replaces a stage's command by one that
# hangs or fails (the rehearsal plants both); GPU_CHECK_FAKE="stage:rc,..." a dry run in which
# every stage command is replaced by one that exits with rc (tests/test_gpu_check.sh), with
# GPU_CHECK_FAKE_SUMMARY_FAIL, GPU_CHECK_FAKE_ABORT=STAGE, GPU_CHECK_FAKE_SANITIZER=0,
# GPU_CHECK_FAKE_NCU=0, GPU_CHECK_FAKE_CUDA_LOSS, GPU_CHECK_FAKE_TORCH_LOSS.
set -uo pipefail # no -e: a failing stage or summary step must not stop the table
cd "$(dirname "$0")/.."
ROOT=$(pwd)

MODE=run
case "${1:-}" in
    "") ;;
    --plan) MODE=plan ;;
    --rehearsal) MODE=rehearsal ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1': use --plan, --rehearsal or no argument (-h for help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "error: one argument at most (--plan, --rehearsal)" >&2; exit 2; }

# name, cap on the GPU (s), cap in the rehearsal (s), what it measures
STAGES=(
"build                150 300 train_gpt (CPU reference), train_gpt_cu, test_gpt_cu, test_attention, cudnn_attention for this GPU's arch"
"bench_cuda            45  90 1.3b seq 2048 mb 4 gb 16, default attention (cuDNN when built): ms/step, tokens/s, TFLOP/s, MFU; config used"
"bench_cuda_tc         30  60 the same with LLMC_ATTENTION=tc: the own tensor-core flash attention"
"bench_torch_eager     45  90 PyTorch eager, same shape, weights and samples: ms/step, and its step-1 loss against train_gpt_cu's"
"attention             20  60 test_attention --large: own tensor-core attention, hs 64/128/160 at T 2048, against fp64"
"cudnn                 20  20 cudnn_attention: cuDNN against the own tensor-core kernel, checked and timed"
"fixtures              30  90 PyTorch fixtures (PASS at once when fixtures/ was carried)"
"tests                 60 150 test_gpt_cu: PyTorch fixtures, train_gpt_cu against the CPU trainer, bit-exact resume"
"sanitizer_memcheck    30  60 compute-sanitizer memcheck, tiny, one step, own kernels (LLMC_ATTENTION=tc)"
"sanitizer_racecheck   30  60 compute-sanitizer racecheck, tiny, one step, own kernels (LLMC_ATTENTION=tc)"
"profile               45  60 ncu on step 2 of the 1.3b run alone (LLMC_PROFILE_STEP): ms per kernel class vs the cost model"
"bench_torch_compiled  60  20 PyTorch torch.compile, same shape (last: its compile time is the least predictable)"
)
stage_field() { # stage_field NAME COLUMN (2: GPU cap, 3: rehearsal cap, 4: what)
    local s; for s in "${STAGES[@]}"; do
        set -- $s; local n=$1
        if [ "$n" = "$NAME_Q" ]; then case $COL_Q in 2) echo "$2" ;; 3) echo "$3" ;; 4) shift 3; echo "$*" ;; esac; return; fi
    done
}
field() { NAME_Q=$1 COL_Q=$2 stage_field; }
cap_of() { field "$1" "$([ "$MODE" = rehearsal ] && echo 3 || echo 2)"; }
STAGE_NAMES=(); for s in "${STAGES[@]}"; do set -- $s; STAGE_NAMES+=("$1"); done

DEFAULT_BUDGET=420; [ "$MODE" = rehearsal ] && DEFAULT_BUDGET=900
BUDGET=${GPU_CHECK_BUDGET:-$DEFAULT_BUDGET}

if [ "$MODE" = plan ]; then
    after=0
    printf '%-22s %6s  %s\n' stage "cap s" "what it measures"
    for n in "${STAGE_NAMES[@]}"; do
        c=$(field "$n" 2); [ "$n" = build ] || after=$((after + c))
        printf '%-22s %6s  %s\n' "$n" "$c" "$(field "$n" 4)"
    done
    echo "caps after the build: ${after} s; global deadline with the build: ${BUDGET} s (GPU_CHECK_BUDGET)"
    echo "later stages get what is left of the deadline; a stage past its cap is TIMEOUT, one with no time left SKIP"
    exit 0
fi

WORK=${GPU_CHECK_WORK:-$ROOT/build/gpu_check/work}
[ -n "${GPU_CHECK_OUT:-}" ] && DEST=$GPU_CHECK_OUT || DEST=${OUT:-$ROOT/build/gpu_check/out}
rm -rf "$WORK"; mkdir -p "$WORK" "$DEST" || { echo "error: cannot create $WORK or $DEST" >&2; exit 2; }
T_START=$(date +%s)
RESULTS="$WORK/results.tsv"; : > "$RESULTS"
BENCH="$WORK/bench.tsv"; : > "$BENCH"
CONFIG="$WORK/config.txt"; : > "$CONFIG"
FAILED=0; CURRENT=""; CHILD=""
FAKE=${GPU_CHECK_FAKE-}
FAKE_ON=0; [ -n "${GPU_CHECK_FAKE+set}" ] && FAKE_ON=1
PLANT=${GPU_CHECK_PLANT-}
ONLY=${GPU_CHECK_ONLY-}
GPU_NAME=""; CC_CAP=""; PEAK=${PEAK:-}; MB=${BENCH_MB:-4}; GB=${BENCH_GB:-16}; STEPS=${BENCH_STEPS:-6}

elapsed() { echo $(( $(date +%s) - T_START )); }
log() { echo "[gpu_check $(elapsed)s] $*"; }
kv() { local k=$2 kvp; for kvp in ${1//,/ }; do [ "${kvp%%:*}" = "$k" ] && { echo "${kvp#*:}"; return; }; done; }
wanted() { [ -z "$ONLY" ] || [ "$1" = build ] || [[ ",$ONLY," == *",$1,"* ]]; }
record() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RESULTS"
    [ "$2" = FAIL ] && FAILED=1
    pack
    # GPU_CHECK_FAKE_ABORT=STAGE: the script dies right after STAGE (the table must still appear)
    if [ $FAKE_ON = 1 ] && [ "${GPU_CHECK_FAKE_ABORT:-}" = "$1" ]; then echo "fake abort after $1"; exit 9; fi
}
status_of() { case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; 125) echo SKIP ;; *) echo FAIL ;; esac; }
# the last "N passed, M failed" line of a log, and its first FAIL lines
verdict() { { grep -E 'passed, [0-9]+ failed' "$1" | tail -n 1; grep -m 2 '^FAIL' "$1"; } 2>/dev/null | tr '\n' ';' ; }

# run_stage NAME CMD...: CMD with timeout min(cap, time left), output in $WORK/NAME.log. Returns
# CMD's status (124/137: timed out); 125 when no time was left. The command runs in the
# background so that a SIGTERM to this script is handled at once (the trap ends it).
run_stage() {
    local name=$1; shift
    local cap; cap=$(cap_of "$name")
    local left=$(( BUDGET - $(elapsed) ))
    local t=$(( cap < left ? cap : left ))
    if [ $t -lt 5 ]; then echo "no time left in the ${BUDGET}s budget" > "$WORK/$name.log"; log "$name: no time left"; return 125; fi
    log "$name (cap ${cap}s, timeout ${t}s)"
    CURRENT=$name
    local rc=0 how
    how=$(kv "$PLANT" "$name")
    if [ "$how" = hang ]; then set -- sleep 100000
    elif [ "$how" = fail ]; then set -- bash -c 'echo "planted failure (GPU_CHECK_PLANT)"; exit 1'
    elif [ $FAKE_ON = 1 ]; then
        rc=$(kv "$FAKE" "$name"); rc=${rc:-0}
        set -- bash -c "echo 'fake $name: exit $rc'; [ $rc = 0 ] && echo '1 passed, 0 failed'; exit $rc"
    fi
    timeout --kill-after=5 "$t" "$@" > "$WORK/$name.log" 2>&1 &
    CHILD=$!
    wait "$CHILD"; rc=$?
    CHILD=""; CURRENT=""
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then log "$name TIMED OUT after ${t}s"; echo "TIMED OUT after ${t}s" >> "$WORK/$name.log"; fi
    tail -n 3 "$WORK/$name.log" | cut -c1-160 | sed "s/^/    /"
    return $rc
}

# ---------------------------------------------------------------------------------------
# the table, and the packing into $DEST: after every stage and on every exit
table() {
    local rule="----------------------------------------------------------------------------------------------------"
    echo "GPU check ($MODE): ${GPU_NAME:-unknown GPU} (sm_${CC_CAP:-?}), peak ${PEAK:-?} TFLOP/s bf16 dense, $(elapsed)s of ${BUDGET}s"
    echo "$rule"
    printf '%-22s %-7s %s\n' stage status detail
    local n st d
    for n in "${STAGE_NAMES[@]}"; do
        if grep -q "^$n	" "$RESULTS"; then
            while IFS=$'\t' read -r s st d; do [ "$s" = "$n" ] && printf '%-22s %-7s %s\n' "$s" "$st" "$d"; done < "$RESULTS"
        else printf '%-22s %-7s %s\n' "$n" "-" "$([ "$n" = "$CURRENT" ] && echo running || echo pending)"
        fi
    done
    local p f t s; p=$(awk -F'\t' '$2=="PASS"' "$RESULTS" | wc -l); f=$(awk -F'\t' '$2=="FAIL"' "$RESULTS" | wc -l)
    t=$(awk -F'\t' '$2=="TIMEOUT"' "$RESULTS" | wc -l); s=$(awk -F'\t' '$2=="SKIP"' "$RESULTS" | wc -l)
    echo "stages: $p PASS, $f FAIL, $t TIMEOUT, $s SKIP"
    if [ -s "$BENCH" ]; then
        echo "$rule"
        echo "benchmark: ${BENCH_DESC:-?}; median step after 2 warm-up steps"
        printf '%-64.64s %9s %9s %8s %7s %8s\n' implementation ms/step tokens/s TFLOP/s MFU loss
        while IFS=$'\t' read -r name ms toks tf mfu loss; do
            printf '%-64.64s %9s %9s %8s %7s %8s\n' "$name" "$ms" "$toks" "$tf" "$mfu" "$loss"
        done < "$BENCH"
    fi
    if [ -s "$CONFIG" ]; then echo "$rule"; echo "configuration used (the build and bench_cuda's own report):"; cut -c1-160 "$CONFIG"; fi
    if grep -q '^MEASURED' "$WORK/profile.log" 2>/dev/null; then echo "$rule"; sed -n '/^MEASURED/,$p' "$WORK/profile.log"; fi
    echo "$rule"
    echo "NOT exercised here: NCCL or MPI between ranks (one GPU, no MPI on the machine), multi-node."
}
pack() {
    table > "$DEST/gpu_check_table.txt" 2>/dev/null
    cp "$RESULTS" "$DEST/gpu_check_results.tsv" 2>/dev/null
    tar -czf "$DEST/gpu_check_logs.tgz.tmp" -C "$WORK" --exclude='*.bin' . 2>/dev/null && mv -f "$DEST/gpu_check_logs.tgz.tmp" "$DEST/gpu_check_logs.tgz"
}
on_signal() {
    trap '' TERM INT
    log "received SIG$1 during ${CURRENT:-no stage}: ending"
    if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2>/dev/null; sleep 1; kill -KILL "$CHILD" 2>/dev/null; fi
    [ -n "$CURRENT" ] && printf '%s\t%s\t%s\n' "$CURRENT" TIMEOUT "gpu_check killed by SIG$1 during this stage" >> "$RESULTS"
    CURRENT=""; CHILD=""
    [ "$1" = TERM ] && exit 143
    exit 130
}
on_exit() {
    local rc=$?
    trap '' TERM INT
    local n
    for n in "${STAGE_NAMES[@]}"; do
        grep -q "^$n	" "$RESULTS" || printf '%s\t%s\t%s\n' "$n" SKIP "not reached (the run ended first)" >> "$RESULTS"
    done
    echo
    table
    pack
    echo "packed: $DEST/gpu_check_table.txt, gpu_check_results.tsv, gpu_check_logs.tgz (every log of $WORK)"
    [ $rc = 0 ] && rc=$FAILED
    exit $rc
}
trap on_exit EXIT
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

# ---------------------------------------------------------------------------------------
# 0. environment: the real machine, the rehearsal's stand-ins, or the dry run
PY=""
first_py() { local p; for p in python3 /usr/bin/python3 python; do
    command -v "$p" > /dev/null 2>&1 && "$p" -c "import torch, numpy" > /dev/null 2>&1 && { command -v "$p"; return; }; done; }
if [ "$MODE" = rehearsal ]; then
    # stand-ins on PATH: nvidia-smi names an H200, compute-sanitizer and ncu run the command
    # for real (the emulated binary) and print what the real tools would (no GPU to check)
    SB="$WORK/standins"; mkdir -p "$SB"
    printf '#!/usr/bin/env bash\n# rehearsal stand-in\ncase "$*" in *compute_cap*) echo 9.0 ;; *name*) echo "NVIDIA H200 (rehearsal stand-in)" ;; esac\n' > "$SB/nvidia-smi"
    cat > "$SB/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
# rehearsal stand-in: runs the program and reports no errors (the emulation's own detectors run in make test)
tool=memcheck
while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift 2 ;; --*) shift 2 ;; *) break ;; esac; done
"$@"; rc=$?
[ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (stand-in)" || echo "========= ERROR SUMMARY: 0 errors (stand-in)"
exit $rc
EOF
    cat > "$SB/ncu" <<'EOF'
#!/usr/bin/env bash
# rehearsal stand-in: runs the program, then writes ncu's CSV with three made-up kernels
log=""
while [ $# -gt 0 ]; do case $1 in --log-file) log=$2; shift 2 ;; --metrics|--clock-control|--print-units|--print-kernel-base|--profile-from-start) shift 2 ;; --*) shift ;; *) break ;; esac; done
"$@" || exit $?
/usr/bin/python3 -c "import sys; sys.path.insert(0, 'dev/cuda'); from kernel_times import ncu_csv
open(sys.argv[1], 'w').write(ncu_csv([('nvjet_tst_128x256', '1', 'msecond'), ('flash_tc_forward', '500', 'usecond'), ('layernorm_forward_kernel', '2,000', 'nsecond')]))" "$log"
EOF
    chmod +x "$SB"/*
    export PATH="$SB:$PATH"
fi
if [ $FAKE_ON = 1 ]; then
    NVCC=fake-nvcc; GPU_NAME="FAKE GPU (GPU_CHECK_FAKE)"; CC_CAP=90; PEAK=${PEAK:-989}; PY=/usr/bin/python3
    SANITIZER=$([ "${GPU_CHECK_FAKE_SANITIZER:-1}" = 1 ] && echo fake-compute-sanitizer)
    NCU=$([ "${GPU_CHECK_FAKE_NCU:-1}" = 1 ] && echo fake-ncu)
else
    NVCC=$(command -v nvcc || true)
    [ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
    GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
    CC_CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ' || true)
    if [ -z "$CC_CAP" ] && [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/__nvcc_device_query" ]; then
        CC_CAP=$("$(dirname "$NVCC")/__nvcc_device_query" 2>/dev/null | grep -o '[0-9][0-9]*' | head -n 1 || true)
    fi
    [ -n "$CC_CAP" ] || CC_CAP=90
    if [ -z "${PEAK:-}" ]; then
        case "$GPU_NAME" in *H100*PCIe*) PEAK=756 ;; *H200*|*H100*|*H800*) PEAK=989 ;; *A100*|*A800*) PEAK=312 ;; *) PEAK=0 ;; esac
    fi
    PY=$(first_py)
    SANITIZER=$(command -v compute-sanitizer || true)
    [ -z "$SANITIZER" ] && [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] && SANITIZER=$(dirname "$NVCC")/compute-sanitizer
    NCU=$(command -v ncu || true)
    [ -n "$NCU" ] || NCU=$(ls -d "$(dirname "${NVCC:-/x/x}")/ncu" /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1 || true)
fi
JOBS=$(nproc 2>/dev/null || echo 4)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
log "mode $MODE; GPU: ${GPU_NAME:-unknown} (sm_$CC_CAP, peak $PEAK TFLOP/s); nvcc: ${NVCC:-none}; python with torch: ${PY:-none};" \
    "compute-sanitizer: ${SANITIZER:-none}; ncu: ${NCU:-none}; logs $WORK, packed into $DEST"

# what each mode runs: binaries, shapes, PyTorch's device
if [ "$MODE" = rehearsal ]; then
    TRAIN_CU=build/cuda-emu/train_gpt_cu; TEST_CU=build/cuda-emu/test_gpt_cu
    CHECK_ATTN=(build/cuda-emu/test_attention); CUDNN_ATTN=""
    BUILD_CMD="make -j$JOBS --no-print-directory train_gpt build/cuda-emu/train_gpt_cu build/cuda-emu/test_gpt_cu build/cuda-emu/test_attention"
    SHAPE=(-model tiny -L 2 -seq 64 -V 512 -vpad 128); VOCAB=512; MB=${BENCH_MB:-2}; GB=${BENCH_GB:-4}; STEPS=${BENCH_STEPS:-2}
    TORCH_DEV=(-device cpu -dtype fp32); PGPU=H200
    export CUEMU_DEVICES=1
else
    TRAIN_CU=./train_gpt_cu; TEST_CU=./test_gpt_cu
    CHECK_ATTN=(build/cuda/test_attention --large); CUDNN_ATTN=build/cuda/cudnn_attention
    MAKE_CUDA="make -j$JOBS --no-print-directory -f dev/cuda/cuda.mk NVCC=$NVCC CUDA_ARCHS=$CC_CAP CUDA_MPICXX=/nonexistent/mpicxx CUDA_WERROR=0"
    # CPU and CUDA builds side by side (each nvcc call is single-threaded)
    BUILD_CMD="set -e; make -j$JOBS --no-print-directory train_gpt > $WORK/build_cpu.log 2>&1 & cpu=\$!
        $MAKE_CUDA cuda-libs cuda-build build/cuda/test_attention; wait \$cpu || { cat $WORK/build_cpu.log; exit 1; }
        $TRAIN_CU -check"
    SHAPE=(-model 1.3b); VOCAB=50257
    TORCH_DEV=(-device cuda -dtype bf16); PGPU=H200; case "$GPU_NAME" in *H100*) PGPU=H100 ;; esac
fi
BENCH_DESC="$(echo "${SHAPE[*]}" | sed 's/-model //'), micro-batch $MB, global batch $GB"

# helper scripts (written to $WORK, so they travel with the logs)
cat > "$WORK/synth.py" <<'EOF'
# an llm.c token shard: a learnable pattern with 20% noise. synth.py PATH TOKENS VOCAB
import struct, sys
import numpy as np
n, V = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(99)
i = np.arange(n, dtype=np.int64)
tok = (i * 7 + i // 13) % V
noise = rng.random(n) < 0.2
tok[noise] = rng.integers(0, V, int(noise.sum()))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(tok.astype("<u2").tobytes())
EOF
cat > "$WORK/cmp_loss.py" <<'EOF'
# step-1 loss of train_gpt_cu (JSONL log) against PyTorch's (bench_torch_gpu.py -init llmc -data: the
# same initial weights and the same samples). Exit 0 agree, 1 differ, 2 not comparable.
# Tolerance: relative 2e-2. Both round every matmul input to bf16 (2^-9 relative per element)
# and differ in kernels and accumulation order; the mean over gb x T tokens averages that, so
# 2e-2 leaves a wide margin and still catches a wrong model, loss, vocabulary, mask or kernel
# (those move the loss by 1e-1 and more). At init the loss is ~ln(V) whatever the draw, so
# this does NOT prove equal weights: tests/test_bench_torch_init.py proves that on the CPU.
import json, sys
try:
    c = [json.loads(l) for l in open(sys.argv[1]) if '"type":"train"' in l]
    x = [r["loss"] for r in c if r["step"] == 1][0]
    t = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
    y = t["losses"][0]
except Exception as e:
    print("step-1 loss not compared (%s: %s)" % (type(e).__name__, e)); sys.exit(2)
rel = abs(x - y) / max(abs(x), 1e-30)
ok = rel <= 2e-2
print("%s (step 1: train_gpt_cu %.4f vs pytorch %.4f, rel %.1e)" % ("losses agree" if ok else "LOSSES DIFFER", x, y, rel))
sys.exit(0 if ok else 1)
EOF
cat > "$WORK/summarize.py" <<'EOF'
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
    name = j["impl"] + " (torch " + str(j.get("torch", "?")) + ")"
    ms, tok_s, tf, mfu, loss = j["ms"], j["tok_s"], j["tflops"], j.get("mfu"), j["loss"]
print("%s\t%.1f\t%.0f\t%.1f\t%s\t%.4f" % (name, ms, tok_s, tf, "%.1f%%" % (100 * mfu) if mfu is not None else "n/a", loss))
EOF
summarize() { # one benchmark row; a failing summary step gives a row that says so
    local row
    if [ $FAKE_ON = 1 ]; then
        [ "${GPU_CHECK_FAKE_SUMMARY_FAIL:-0}" = 1 ] && row="" || row=$(printf '%s\t1.0\t1\t1.0\tn/a\t1.0' "$1")
    else
        row=$("$PY" "$WORK/summarize.py" "$1" "$2" 2> "$WORK/summary.err") || row=""
    fi
    [ -n "$row" ] || row=$(printf '%s\tsummary failed (%s)\t\t\t\t' "$1" "$(basename "$2")")
    echo "$row" >> "$BENCH"
}
skip() { record "$1" SKIP "$2"; }
not_selected() { ! wanted "$1" && { skip "$1" "not in GPU_CHECK_ONLY"; return 0; }; return 1; }

# ---------------------------------------------------------------------------------------
# 1. build
BUILD_OK=0
if [ -z "$NVCC" ] && [ "$MODE" = run ]; then
    record build FAIL "nvcc not found: install the CUDA toolkit (or put nvcc on PATH)"
else
    rc=0; run_stage build bash -c "$BUILD_CMD" || rc=$?
    [ $rc = 0 ] && BUILD_OK=1
    { grep -m 1 '^NCCL' "$WORK/build.log"; grep -m 1 'cuDNN fused attention\|cuDNN attention off' "$WORK/build.log"; } >> "$CONFIG" 2>/dev/null
    record build "$(status_of $rc)" "$([ "$MODE" = rehearsal ] && echo "emulated binaries (cuemu)" || echo "sm_$CC_CAP only, warnings allowed, no MPI"); $(grep -m 1 -o 'cuDNN fused attention: on\|cuDNN attention off' "$WORK/build.log" 2>/dev/null)"
fi
NOBUILD="no build (stage build did not pass)"

# synthetic data for the benchmarks, the sanitizers and the profile
DATA="$WORK/synth_000.bin"
if [ $FAKE_ON = 1 ]; then : > "$DATA"; elif [ -n "$PY" ]; then "$PY" "$WORK/synth.py" "$DATA" 2000000 "$VOCAB" || rm -f "$DATA"; fi
READY=$([ $BUILD_OK = 1 ] && [ -f "$DATA" ] && echo 1 || echo 0)
NOTREADY="$NOBUILD or no data (python3 with numpy)"
TINY=(-model tiny -mb 1 -gb 2 -ramp off -lr 1e-3 -warmup 0 -decay 1000000000 -tokens 1000000000000 -i "$DATA" -j '' -seed 5)
[ "$MODE" = rehearsal ] && TINY+=(-L 2 -seq 64 -V 512 -vpad 128)
# the benchmark recipe, as bench_torch_gpu.py runs it: constant LR, the shard in order, the same seed
BSEED=1337; BLR=1e-4
BARGS=("${SHAPE[@]}" -mb "$MB" -gb "$GB" -ramp off -lr $BLR -warmup 0 -decay 1000000000000 -tokens 10000000000000
       -i "$DATA" -j '' -shuffle 0 -seed $BSEED -peak "$PEAK")

# ---------------------------------------------------------------------------------------
# 2. the benchmark: train_gpt_cu as a user runs it (cuDNN when built), the own tensor-core
# attention, PyTorch eager from the same weights
CUDA_OK=0
for variant in bench_cuda bench_cuda_tc; do
    if not_selected $variant; then continue; fi
    if [ "$READY" != 1 ]; then skip $variant "$NOTREADY"; continue; fi
    envs=(LLMC_GEMM_REPORT=1); how="default"
    [ $variant = bench_cuda_tc ] && { envs=(LLMC_ATTENTION=tc); how="LLMC_ATTENTION=tc"; }
    label="train_gpt_cu $how"
    n=$((STEPS + 2)); [ $variant = bench_cuda_tc ] && n=$((STEPS / 2 + 3))
    rc=0; run_stage $variant env "${envs[@]}" "$TRAIN_CU" "${BARGS[@]}" -steps $n -log "$WORK/$variant.jsonl" || rc=$?
    [ $FAKE_ON = 1 ] && printf '{"type":"train","step":1,"loss":%s}\n' "${GPU_CHECK_FAKE_CUDA_LOSS:-10.9876}" > "$WORK/$variant.jsonl"
    if [ $rc = 0 ]; then
        att=$(grep -m 1 '^| attention ' "$WORK/$variant.log" | sed 's/^| attention *| *//; s/ *|$//')
        label="train_gpt_cu $how: ${att:-attention unknown}"
        summarize "$label" "$WORK/$variant.jsonl"
    fi
    if [ $variant = bench_cuda ]; then
        CUDA_OK=$([ $rc = 0 ] && echo 1 || echo 0)
        grep -E '^\| (attention|device) |^gemm|^warning|^note: (cuDNN|.*attention)' "$WORK/$variant.log" >> "$CONFIG" 2>/dev/null
    fi
    record $variant "$(status_of $rc)" "${label}; $(grep -m 1 -o 'warning: .\{0,90\}' "$WORK/$variant.log" 2>/dev/null)"
done
torch_bench() { # torch_bench STAGE COMPILE
    local name=$1 mode=$2
    if not_selected "$name"; then return; fi
    if [ "$READY" != 1 ] || [ -z "$PY" ]; then skip "$name" "$([ -z "$PY" ] && echo 'no python with torch' || echo "$NOTREADY")"; return; fi
    local rc=0
    run_stage "$name" "$PY" dev/bench_torch_gpu.py "${SHAPE[@]}" -mb "$MB" -gb "$GB" -steps "$STEPS" -warmup-steps 2 \
        -compile "$mode" -peak "$PEAK" -init llmc -seed $BSEED -data "$DATA" -lr $BLR "${TORCH_DEV[@]}" || rc=$?
    [ $FAKE_ON = 1 ] && printf '{"impl":"pytorch fake","losses":[%s]}\n' "${GPU_CHECK_FAKE_TORCH_LOSS-10.9912}" >> "$WORK/$name.log"
    [ $rc = 0 ] && summarize "pytorch" "$WORK/$name.log"
    local st cmp crc
    st=$(status_of $rc); cmp="step-1 loss not compared (train_gpt_cu did not pass)"
    if [ $rc = 0 ] && [ "$CUDA_OK" = 1 ]; then
        crc=0; cmp=$("$PY" "$WORK/cmp_loss.py" "$WORK/bench_cuda.jsonl" "$WORK/$name.log" 2>&1 | tail -n 1) || crc=$?
        [ $crc = 1 ] && st=FAIL # a real disagreement; 2 (not comparable) stays PASS with the reason
    elif [ $rc != 0 ]; then cmp="$(tail -n 1 "$WORK/$name.log" | cut -c1-100)"
    fi
    record "$name" "$st" "$cmp"
}
torch_bench bench_torch_eager 0

# ---------------------------------------------------------------------------------------
# 3. correctness: the attention kernels, the fixtures, test_gpt_cu
if ! not_selected attention; then
    if [ $BUILD_OK = 1 ]; then
        rc=0; run_stage attention "${CHECK_ATTN[@]}" || rc=$?
        record attention "$(status_of $rc)" "${CHECK_ATTN[*]##*/}: $(verdict "$WORK/attention.log")"
    else skip attention "$NOBUILD"; fi
fi
if ! not_selected cudnn; then
    if [ $BUILD_OK = 1 ] && { [ $FAKE_ON = 1 ] || { [ -n "$CUDNN_ATTN" ] && [ -x "$CUDNN_ATTN" ]; }; }; then
        rc=0; run_stage cudnn "$CUDNN_ATTN" || rc=$?
        record cudnn "$(status_of $rc)" "cuDNN vs own tensor-core kernel: $(verdict "$WORK/cudnn.log"); $(grep -c '^BENCH' "$WORK/cudnn.log" 2>/dev/null) timings"
    else skip cudnn "$([ $BUILD_OK = 1 ] && echo 'the build has no cuDNN (build.log: make cuda-libs says what was found)' || echo "$NOBUILD")"; fi
fi
FIX_OK=0
if ! not_selected fixtures; then
    if [ -f fixtures/fixture.bin ] && [ $FAKE_ON = 0 ]; then FIX_OK=1; record fixtures PASS "fixtures/ carried with the tree (not regenerated)"
    elif [ -z "$PY" ]; then skip fixtures "no python with torch"
    else
        rc=0; run_stage fixtures "$PY" dev/train_gpt.py --out fixtures || rc=$?
        [ $rc = 0 ] && FIX_OK=1
        record fixtures "$(status_of $rc)" "dev/train_gpt.py --out fixtures (PyTorch on the CPU)"
    fi
fi
if ! not_selected tests; then
    if [ $BUILD_OK = 1 ] && [ $FIX_OK = 1 ]; then
        rc=0; run_stage tests env LLMC_TEST_LAYOUTS=0 LLMC_TRAIN_GPT_CU="$TRAIN_CU" "$TEST_CU" fixtures || rc=$?
        record tests "$(status_of $rc)" "test_gpt_cu: $(verdict "$WORK/tests.log")"
    else skip tests "$([ $BUILD_OK = 1 ] && echo 'no fixtures' || echo "$NOBUILD")"; fi
fi

# ---------------------------------------------------------------------------------------
# 4. compute-sanitizer on the own kernels (with cuDNN on it would check NVIDIA's attention)
for tool in memcheck racecheck; do
    name=sanitizer_$tool
    if not_selected $name; then continue; fi
    if [ "$READY" != 1 ]; then skip $name "$NOTREADY"; continue; fi
    if [ -z "$SANITIZER" ]; then skip $name "compute-sanitizer not found"; continue; fi
    rc=0; run_stage $name env LLMC_ATTENTION=tc "$SANITIZER" --tool $tool --error-exitcode 3 "$TRAIN_CU" "${TINY[@]}" -steps 1 || rc=$?
    sum=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$WORK/$name.log" | tail -n 1 | cut -c1-80)
    [ -n "$sum" ] || sum=$(grep -v '^TIMED OUT' "$WORK/$name.log" | tail -n 1 | cut -c1-80)
    record $name "$(status_of $rc)" "tiny, 1 step, LLMC_ATTENTION=tc: $sum$( [ $rc = 3 ] && echo ' (errors found)')"
done

# ---------------------------------------------------------------------------------------
# 5. profile: step 2 alone under ncu (the trainer brackets it with cudaProfilerStart/Stop),
# kernel durations only, clocks left alone, beside the cost model's per-class prediction
if ! not_selected profile; then
    if [ "$READY" != 1 ]; then skip profile "$NOTREADY"
    elif [ -z "$NCU" ]; then skip profile "ncu (Nsight Compute) not found: no measured per-kernel times"
    else
        { echo 'set -e'
          printf 'NCU=%q; PYK=%q; W=%q; EXE=%q\nARGS=(' "$NCU" "${PY:-python3}" "$WORK" "$TRAIN_CU"; printf ' %q' "${BARGS[@]}"; echo ' )'
          echo 'LLMC_PROFILE_STEP=2 "$NCU" --profile-from-start off --clock-control none --csv --print-units base \'
          echo '    --print-kernel-base function --metrics gpu__time_duration.sum --log-file "$W/ncu_step2.csv" \'
          echo '    "$EXE" "${ARGS[@]}" -steps 2 > "$W/ncu_run.log" 2>&1'
          echo "\"\$PYK\" dev/cuda/kernel_times.py --step \"\$W/ncu_step2.csv\" --pred dev/cuda/costmodel_pred.tsv --gpu $PGPU"
        } > "$WORK/profile.sh"
        rc=0; run_stage profile bash "$WORK/profile.sh" || rc=$?
        record profile "$(status_of $rc)" "$( [ $rc = 0 ] && tail -n 1 "$WORK/profile.log" || echo "ncu failed or timed out (profile.log, ncu_run.log)")"
    fi
fi

# ---------------------------------------------------------------------------------------
# 6. PyTorch compiled, last
torch_bench bench_torch_compiled 1
