#!/usr/bin/env bash
# dev/gpu_check.sh: the one prepared GPU run of the CUDA trainer, sized for one shot on a borrowed
# H100 80GB (an H200 when named; 16 cores, no network, no MPI, NCCL, cuDNN and cuBLAS from
# Python wheels; ~15 minutes of device time in all, a bare machine at every start).
#
#   bash dev/gpu_check.sh --plan        the stages, their caps and what each measures; exits
#   bash dev/gpu_check.sh               the run (doc/gpu_check.md has the exact device command)
#   bash dev/gpu_check.sh --rehearsal   the same script on a CPU (also GPU_CHECK_REHEARSAL=1): the CUDA
#                                       code under cuemu at tiny shapes, stand-ins for nvidia-smi,
#                                       compute-sanitizer and ncu (make gpu-rehearsal)
#
# Stages run in order of value (the table STAGES below): the prebuilt binaries carried with the
# command (make gpu-prebuilt: -check and one tiny step; a rebuild from source only when they
# fail), the CPU trainer built in the background (only `tests` needs it); the 1.3b benchmark
# (cuDNN attention, the own tensor-core attention, PyTorch eager from the same weights);
# correctness (attention kernels, fixtures, test_gpt_cu); ncu on one step (its slice reserved);
# compute-sanitizer; PyTorch compiled last. Each stage has a cap; a global deadline
# (GPU_CHECK_BUDGET, 340 s) cuts the later ones. Each stage runs in a session of its own and
# everything in it is killed when it ends. Status words: PASS, FAIL, TIMEOUT (the stage ran out
# of its time), SKIP (not run, with the reason). Exit status 1 when a stage FAILed, else 0.
#
# Logs go to GPU_CHECK_WORK (build/gpu_check/work). After every stage and on any exit (also
# SIGTERM/SIGINT) the table and all logs are packed into GPU_CHECK_OUT (default: $OUT, the
# folder the device machine sends back; else build/gpu_check/out): gpu_check_table.txt,
# gpu_check_results.tsv, gpu_check_logs.tgz. Three files, so nothing is lost to the
# device's limit on what comes back, even when the run is killed.
#
# Environment: GPU_CHECK_OUT, GPU_CHECK_WORK, GPU_CHECK_BUDGET (s), GPU_CHECK_ONLY (stage
# names, comma-separated: the binaries and these only), GPU_CHECK_PREBUILT (build/gpu_prebuilt),
# GPU_CHECK_PY (the python with torch), GPU_CHECK_CAPS ("stage:s,..." overrides caps), BENCH_MB (4),
# BENCH_GB (16), BENCH_STEPS (6 timed after 2 warm-up), PEAK (bf16 dense TFLOP/s; from the GPU name).
# Test hooks: GPU_CHECK_PLANT="stage:hang|fail|escape,..." replaces a stage's command by one that
# hangs, fails, or leaves a process in a process group of its own (the rehearsal plants some);
# GPU_CHECK_FAKE="stage:rc,..." a dry run in which every stage command is replaced by one that
# exits with rc (tests/test_gpu_check.sh), with GPU_CHECK_FAKE_SUMMARY_FAIL, GPU_CHECK_FAKE_ABORT=STAGE,
# GPU_CHECK_FAKE_SANITIZER=0, GPU_CHECK_FAKE_NCU=0, GPU_CHECK_FAKE_CUDA_LOSS, GPU_CHECK_FAKE_TORCH_LOSS.
set -uo pipefail # no -e: a failing stage or summary step must not stop the table
cd "$(dirname "$0")/.."
ROOT=$(pwd)

MODE=run
[ "${GPU_CHECK_REHEARSAL:-0}" = 1 ] && MODE=rehearsal
case "${1:-}" in
    "") ;;
    --plan) MODE=plan ;;
    --rehearsal) MODE=rehearsal ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1': use --plan, --rehearsal or no argument (-h for help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "error: one argument at most (--plan, --rehearsal)" >&2; exit 2; }

# name, cap on the GPU (s), cap in the rehearsal (s), what it measures. The order is the order
# of value; build runs only when prebuilt failed, build_cpu in the background from the start.
STAGES=(
"prebuilt              25  90 the carried sm_90 binaries (make gpu-prebuilt): source hash, libraries found, train_gpt_cu -check and 1 tiny step"
"build                150 500 only when prebuilt failed: train_gpt_cu, test_gpt_cu, test_attention, cudnn_attention from source for this GPU, warnings allowed"
"build_cpu            120 300 train_gpt, the CPU reference (warnings allowed), in the background from the start: only tests needs it"
"bench_cuda            40  90 1.3b seq 2048 mb 4 gb 16, default attention (cuDNN when built): ms/step, tokens/s, TFLOP/s, MFU; config used"
"bench_cuda_tc         25  60 the same with LLMC_ATTENTION=tc: the own tensor-core flash attention"
"bench_torch_eager     40  90 PyTorch eager, same shape, weights and samples: ms/step, and its step-1 loss against train_gpt_cu's"
"attention             15  60 test_attention --large: own tensor-core attention, hs 64/128/160 at T 2048, against fp64"
"cudnn                 15  20 cudnn_attention: cuDNN against the own tensor-core kernel, checked and timed"
"fixtures              20  90 PyTorch fixtures (PASS at once when fixtures/ was carried)"
"tests                 45 400 test_gpt_cu: PyTorch fixtures, train_gpt_cu against the CPU trainer, bit-exact resume"
"profile               45  60 ncu on step 2 of the 1.3b run (LLMC_PROFILE_STEP, NVTX ranges): ms per kernel class vs the cost model, per phase and layer"
"sanitizer_memcheck    25  60 compute-sanitizer memcheck, tiny, one step, own kernels (LLMC_ATTENTION=tc)"
"sanitizer_racecheck   25  60 compute-sanitizer racecheck, tiny, one step, own kernels (LLMC_ATTENTION=tc)"
"bench_torch_compiled  90  20 PyTorch torch.compile, same shape: last, with what is left (its compile time is the least predictable)"
)
# stages whose cap is reserved: the stages before them leave them their cap
RESERVED="profile"
# the device: a start takes 1-2 minutes of the lease, and the one shot must fit 8 minutes with it
START_S=120
DEVICE_TIMEOUT=360
stage_field() { # stage_field NAME COLUMN (2: GPU cap, 3: rehearsal cap, 4: what)
    local s; for s in "${STAGES[@]}"; do
        set -- $s; local n=$1
        if [ "$n" = "$NAME_Q" ]; then case $COL_Q in 2) echo "$2" ;; 3) echo "$3" ;; 4) shift 3; echo "$*" ;; esac; return; fi
    done
}
field() { NAME_Q=$1 COL_Q=$2 stage_field; }
kv() { local k=$2 kvp; for kvp in ${1//,/ }; do [ "${kvp%%:*}" = "$k" ] && { echo "${kvp#*:}"; return; }; done; }
cap_of() {
    local c; c=$(kv "${GPU_CHECK_CAPS-}" "$1")
    [ -n "$c" ] && { echo "$c"; return; }
    field "$1" "$([ "$MODE" = rehearsal ] && echo 3 || echo 2)"
}
STAGE_NAMES=(); for s in "${STAGES[@]}"; do set -- $s; STAGE_NAMES+=("$1"); done

DEFAULT_BUDGET=340; [ "$MODE" = rehearsal ] && DEFAULT_BUDGET=1200
BUDGET=${GPU_CHECK_BUDGET:-$DEFAULT_BUDGET}

if [ "$MODE" = plan ]; then
    seq=0
    printf '%-22s %6s  %s\n' stage "cap s" "what it measures"
    for n in "${STAGE_NAMES[@]}"; do
        c=$(field "$n" 2)
        case $n in build|build_cpu|bench_torch_compiled) ;; *) seq=$((seq + c)) ;; esac
        printf '%-22s %6s  %s\n' "$n" "$c" "$(field "$n" 4)"
    done
    echo "one shot: prebuilt and the stages up to sanitizer_racecheck ${seq} s of caps, within the deadline of ${BUDGET} s"
    echo "(GPU_CHECK_BUDGET); bench_torch_compiled gets what is left (at least $((BUDGET - seq)) s); build_cpu runs beside them."
    echo "device: start ~${START_S} s + device-timeout ${DEVICE_TIMEOUT} s = $((START_S + DEVICE_TIMEOUT)) s of the lease (<= 480 s)."
    echo "when prebuilt fails, build (cap $(field build 2) s) rebuilds from source and the deadline cuts the last stages;"
    echo "a stage past its cap is TIMEOUT, one with no time left SKIP; reserved for: $RESERVED"
    exit 0
fi

WORK=${GPU_CHECK_WORK:-$ROOT/build/gpu_check/work}
[ -n "${GPU_CHECK_OUT:-}" ] && DEST=$GPU_CHECK_OUT || DEST=${OUT:-$ROOT/build/gpu_check/out}
rm -rf "$WORK"; mkdir -p "$WORK" "$DEST" || { echo "error: cannot create $WORK or $DEST" >&2; exit 2; }
T_START=$(date +%s)
RESULTS="$WORK/results.tsv"; : > "$RESULTS"
BENCH="$WORK/bench.tsv"; : > "$BENCH"
CONFIG="$WORK/config.txt"; : > "$CONFIG"
FAILED=0; CURRENT=""; CHILD=""; CPU_BG=""
FAKE=${GPU_CHECK_FAKE-}
FAKE_ON=0; [ -n "${GPU_CHECK_FAKE+set}" ] && FAKE_ON=1
PLANT=${GPU_CHECK_PLANT-}
ONLY=${GPU_CHECK_ONLY-}
PREBUILT=${GPU_CHECK_PREBUILT:-build/gpu_prebuilt}
GPU_NAME=""; CC_CAP=""; PEAK=${PEAK:-}; MB=${BENCH_MB:-4}; GB=${BENCH_GB:-16}; STEPS=${BENCH_STEPS:-6}
SETSID=$(command -v setsid || true)
read -r MYSTAT < /proc/$$/stat; set -- ${MYSTAT##*) }; MYSID=$4

elapsed() { echo $(( $(date +%s) - T_START )); }
log() { echo "[gpu_check $(elapsed)s] $*"; }
wanted() { [ -z "$ONLY" ] || [[ ",prebuilt,build,build_cpu,$ONLY," == *",$1,"* ]]; }
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

# kill_stage PID: the stage's process, every process below it, and every process in their
# sessions (a stage runs in a session of its own: a nested `timeout`, which puts itself in a
# process group of its own, or an orphan reparented away, are still in it); never this script's
kill_stage() {
    local root=$1 p st rest ppid sid
    [ -n "$root" ] || return 0
    local -A kids=() sids=()
    kids[$root]=1
    # setsid made the stage's process a session leader in place (a background job of a script is
    # no process group leader, so setsid need not fork): its pid is the session id, still valid
    # for the processes it left behind once it has exited and been reaped
    [ -n "$SETSID" ] && [ "$root" != "$MYSID" ] && sids[$root]=1
    local grew=1 all=()
    for p in /proc/[0-9]*; do all+=("${p#/proc/}"); done
    while [ $grew = 1 ]; do # the process tree below root (parent links)
        grew=0
        for p in "${all[@]}"; do
            [ -n "${kids[$p]-}" ] && continue
            { read -r st < "/proc/$p/stat"; } 2> /dev/null || continue
            rest=${st##*) }; set -- $rest; ppid=$2
            [ -n "${kids[$ppid]-}" ] && { kids[$p]=1; grew=1; }
        done
    done
    for p in "${!kids[@]}"; do
        { read -r st < "/proc/$p/stat"; } 2> /dev/null || continue
        rest=${st##*) }; set -- $rest; sid=$4
        [ "$sid" != "$MYSID" ] && sids[$sid]=1
    done
    for p in "${all[@]}"; do
        [ "$p" = $$ ] && continue
        { read -r st < "/proc/$p/stat"; } 2> /dev/null || continue
        rest=${st##*) }; set -- $rest; sid=$4
        if [ -n "${kids[$p]-}" ] || [ -n "${sids[$sid]-}" ]; then kill -KILL "$p" 2> /dev/null; fi
    done
    return 0
}

# the command of stage NAME: a planted one (GPU_CHECK_PLANT), the dry run's (GPU_CHECK_FAKE), or
# the given one; sets STAGE_CMD
stage_cmd() {
    local name=$1; shift
    local how rc
    how=$(kv "$PLANT" "$name")
    if [ "$how" = hang ]; then STAGE_CMD=(sleep 100000)
    elif [ "$how" = fail ]; then STAGE_CMD=(bash -c 'echo "planted failure (GPU_CHECK_PLANT)"; exit 1')
    elif [ "$how" = escape ]; then # a nested timeout: a process group of its own, as test_gpt.cu's timeouts
        STAGE_CMD=(bash -c 'timeout 300 sleep 100003 & echo "planted escape (GPU_CHECK_PLANT)"; wait')
    elif [ $FAKE_ON = 1 ]; then
        rc=$(kv "$FAKE" "$name"); rc=${rc:-0}
        STAGE_CMD=(bash -c "echo 'fake $name: exit $rc'; [ $rc = 0 ] && echo '1 passed, 0 failed'; exit $rc")
    else STAGE_CMD=("$@")
    fi
}
# spawn NAME T CMD...: CMD with timeout T in a session of its own, output in $WORK/NAME.log, in
# the background; SPAWNED is its pid
spawn() {
    local name=$1 t=$2; shift 2
    stage_cmd "$name" "$@"
    $SETSID timeout --kill-after=5 "$t" "${STAGE_CMD[@]}" > "$WORK/$name.log" 2>&1 &
    SPAWNED=$!
}
# time_for NAME: min(cap, time left), less the caps of the reserved stages still to come
time_for() {
    local name=$1 cap left r reserve=0
    cap=$(cap_of "$name")
    left=$(( BUDGET - $(elapsed) ))
    if [[ " $RESERVED " != *" $name "* ]]; then
        for r in $RESERVED; do
            grep -q "^$r	" "$RESULTS" || ! wanted "$r" || reserve=$((reserve + $(cap_of "$r")))
        done
    fi
    left=$((left - reserve))
    echo $(( cap < left ? cap : left ))
}

# run_stage NAME CMD...: CMD with timeout time_for(NAME), output in $WORK/NAME.log. Returns
# CMD's status (124/137: timed out); 125 when no time was left. The command runs in the
# background so that a SIGTERM to this script is handled at once (the trap ends it).
run_stage() {
    local name=$1; shift
    local t; t=$(time_for "$name")
    if [ "$t" -lt 5 ]; then echo "no time left in the ${BUDGET}s budget" > "$WORK/$name.log"; log "$name: no time left"; return 125; fi
    log "$name (cap $(cap_of "$name")s, timeout ${t}s)"
    CURRENT=$name
    local rc=0
    spawn "$name" "$t" "$@"
    CHILD=$SPAWNED
    wait "$CHILD"; rc=$?
    kill_stage "$CHILD" # whatever the stage left running (on a GPU: a process holding it)
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
        else printf '%-22s %-7s %s\n' "$n" "-" "$([ "$n" = "$CURRENT" ] || { [ "$n" = build_cpu ] && [ -n "$CPU_BG" ]; } \
            && echo running || echo pending)"
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
    if [ -s "$CONFIG" ]; then echo "$rule"; echo "configuration used (the binaries and bench_cuda's own report):"; cut -c1-160 "$CONFIG"; fi
    if grep -q '^MEASURED' "$WORK/profile.log" 2>/dev/null; then echo "$rule"; sed -n '/^MEASURED/,$p' "$WORK/profile.log"; fi
    echo "$rule"
    echo "NOT exercised here: NCCL or MPI between ranks (one GPU, no MPI on the machine), multi-node."
}
pack() {
    table > "$DEST/gpu_check_table.txt" 2>/dev/null
    cp "$RESULTS" "$DEST/gpu_check_results.tsv" 2>/dev/null
    tar -czf "$DEST/gpu_check_logs.tgz.tmp" -C "$WORK" --exclude='*.bin' --exclude='*.ncu-rep' . 2>/dev/null && \
        mv -f "$DEST/gpu_check_logs.tgz.tmp" "$DEST/gpu_check_logs.tgz"
}
on_signal() {
    trap '' TERM INT
    log "received SIG$1 during ${CURRENT:-no stage}: ending"
    if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2>/dev/null; sleep 1; kill_stage "$CHILD"; fi
    [ -n "$CURRENT" ] && printf '%s\t%s\t%s\n' "$CURRENT" TIMEOUT "gpu_check killed by SIG$1 during this stage" >> "$RESULTS"
    CURRENT=""; CHILD=""
    [ "$1" = TERM ] && exit 143
    exit 130
}
on_exit() {
    local rc=$?
    trap '' TERM INT
    if [ -n "$CPU_BG" ]; then # the CPU build still running: it is not waited for
        kill_stage "$CPU_BG"
        printf '%s\t%s\t%s\n' build_cpu TIMEOUT "still running when the run ended" >> "$RESULTS"
        CPU_BG=""
    fi
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
first_py() { local p; for p in ${GPU_CHECK_PY:-} python3 /usr/bin/python3 python; do
    command -v "$p" > /dev/null 2>&1 && "$p" -c "import torch, numpy" > /dev/null 2>&1 && { command -v "$p"; return; }; done; }
if [ "$MODE" = rehearsal ]; then
    # stand-ins on PATH: nvidia-smi names an H100, compute-sanitizer and ncu run the command
    # for real (the emulated binary) and print what the real tools would (no GPU to check)
    SB="$WORK/standins"; mkdir -p "$SB"
    printf '#!/usr/bin/env bash\n# rehearsal stand-in\ncase "$*" in *compute_cap*) echo 9.0 ;; *name*) echo "NVIDIA H100 80GB HBM3 (rehearsal stand-in)" ;; esac\n' > "$SB/nvidia-smi"
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
# rehearsal stand-in: profiling (-o REPORT) runs the program, then writes a report of four made-up
# kernels in made-up NVTX ranges; --import REPORT --csv prints it as ncu's CSV, by kernel name or,
# with --print-nvtx-rename kernel, by the innermost NVTX range
out=""; imp=""; rename=none
while [ $# -gt 0 ]; do case $1 in -o|--export) out=$2; shift 2 ;; --import|-i) imp=$2; shift 2 ;;
    --print-nvtx-rename) rename=$2; shift 2 ;;
    --metrics|--clock-control|--print-units|--print-kernel-base|--profile-from-start) shift 2 ;; --*|-f) shift ;; *) break ;; esac; done
if [ -n "$imp" ]; then
    exec /usr/bin/python3 -c "import sys, json; sys.path.insert(0, 'dev/cuda'); from kernel_times import ncu_csv
rows = json.load(open(sys.argv[1]))
sys.stdout.write(ncu_csv([(r[1] if sys.argv[2] == 'kernel' else r[0], r[2], r[3]) for r in rows]))" "$imp" "$rename"
fi
"$@" || exit $?
/usr/bin/python3 -c "import sys, json
json.dump([('nvjet_tst_128x256', 'fwd L0', '1', 'msecond'), ('flash_tc_forward', 'fwd L1', '500', 'usecond'),
           ('layernorm_forward_kernel', 'fwd L1', '2,000', 'nsecond'), ('adamw_kernel3', 'optimizer', '300', 'usecond')],
          open(sys.argv[1] + '.ncu-rep', 'w'))" "$out"
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
    "compute-sanitizer: ${SANITIZER:-none}; ncu: ${NCU:-none}; prebuilt: $PREBUILT; logs $WORK, packed into $DEST"

# what each mode runs: the binaries a rebuild makes, shapes, PyTorch's device. The prebuilt
# binaries replace the rebuilt ones when they pass their check.
PGPU=H100; case "$GPU_NAME" in *H200*) PGPU=H200 ;; esac
# the CPU trainer without -Werror (an unknown gcc may warn where ours does not); only tests needs it
CPU_BUILD_CMD=(make -j"$JOBS" --no-print-directory train_gpt CPU_WERROR=)
if [ "$MODE" = rehearsal ]; then
    TRAIN_CU=build/cuda-emu-nompi/train_gpt_cu; TEST_CU=build/cuda-emu-nompi/test_gpt_cu
    CHECK_ATTN=(build/cuda-emu/test_attention); CUDNN_ATTN=""; ATTN_ARGS=()
    BUILD_CMD="make -j$JOBS --no-print-directory $TRAIN_CU $TEST_CU ${CHECK_ATTN[0]} && $TRAIN_CU -check"
    SHAPE=(-model tiny -L 2 -seq 64 -V 512 -vpad 128); VOCAB=512; MB=${BENCH_MB:-2}; GB=${BENCH_GB:-4}; STEPS=${BENCH_STEPS:-2}
    TORCH_DEV=(-device cpu -dtype fp32)
    export CUEMU_DEVICES=1
else
    TRAIN_CU=./train_gpt_cu; TEST_CU=./test_gpt_cu
    CHECK_ATTN=(build/cuda/test_attention); CUDNN_ATTN=build/cuda/cudnn_attention; ATTN_ARGS=(--large)
    MAKE_CUDA="make -j$JOBS --no-print-directory -f dev/cuda/cuda.mk NVCC=$NVCC CUDA_ARCHS=$CC_CAP CUDA_MPICXX=/nonexistent/mpicxx CUDA_WERROR=0"
    BUILD_CMD="set -e; $MAKE_CUDA cuda-libs cuda-build build/cuda/test_attention; $TRAIN_CU -check"
    SHAPE=(-model 1.3b); VOCAB=50257
    TORCH_DEV=(-device cuda -dtype bf16)
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
# 1. the CPU trainer, in the background from the start (one core; only tests needs it)
cpu_build_wait() { # records build_cpu once; CPU_OK 1 when it passed
    [ -n "$CPU_BG" ] || return 0
    local rc=0
    wait "$CPU_BG" || rc=$?
    kill_stage "$CPU_BG"
    CPU_BG=""
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "TIMED OUT after $(cap_of build_cpu)s" >> "$WORK/build_cpu.log"
    [ $rc = 0 ] && CPU_OK=1
    record build_cpu "$(status_of $rc)" "$( [ $rc = 0 ] && echo "train_gpt built (warnings allowed)" || \
        echo "train_gpt did not build: $(grep -m 1 -E 'error|Error|planted' "$WORK/build_cpu.log" | cut -c1-100)")"
}
CPU_OK=0
log "build_cpu in the background (cap $(cap_of build_cpu)s)"
spawn build_cpu "$(cap_of build_cpu)" "${CPU_BUILD_CMD[@]}"
CPU_BG=$SPAWNED

# synthetic data for the prebuilt check, the benchmarks, the sanitizers and the profile
DATA="$WORK/synth_000.bin"
if [ $FAKE_ON = 1 ]; then : > "$DATA"; elif [ -n "$PY" ]; then "$PY" "$WORK/synth.py" "$DATA" 2000000 "$VOCAB" || rm -f "$DATA"; fi
TINY=(-model tiny -mb 1 -gb 2 -ramp off -lr 1e-3 -warmup 0 -decay 1000000000 -tokens 1000000000000 -i "$DATA" -j '' -seed 5)
[ "$MODE" = rehearsal ] && TINY+=(-L 2 -seq 64 -V 512 -vpad 128)

# ---------------------------------------------------------------------------------------
# 2. the binaries: the carried prebuilt ones when they pass, else a rebuild from source
BUILD_OK=0
if [ ! -d "$PREBUILT" ] && [ $FAKE_ON = 0 ]; then
    skip prebuilt "no $PREBUILT (make gpu-prebuilt, and carry it): rebuilding"
else
    { echo 'set -e'
      printf 'P=%q; EXE=%q\nTINY=(' "$PREBUILT" "$PREBUILT/train_gpt_cu"; printf ' %q' "${TINY[@]}"; echo ' )'
      echo 'bash dev/cuda/prebuilt.sh check "$P"'
      echo 'for b in train_gpt_cu test_gpt_cu test_attention cudnn_attention; do'
      echo '    [ -e "$P/$b" ] || { [ $b = cudnn_attention ] && continue; echo "FAIL $P/$b missing"; exit 1; }'
      echo '    miss=$(LD_TRACE_LOADED_OBJECTS=1 "$P/$b" 2>&1 | grep "not found" | tr -s " \t" " ") || true'
      echo '    [ -z "$miss" ] || { echo "FAIL $b: libraries not found:$miss"; exit 1; }'
      echo '    echo "$b: every library found"'
      echo 'done'
      printf '[ -f %q ] || { echo "no data (python3 with numpy): -check and the tiny step not run"; exit 0; }\n' "$DATA"
      echo '"$EXE" -check "${TINY[@]}" -steps 1 > /dev/null'
      echo 'echo "train_gpt_cu -check: ok"'
      echo '"$EXE" "${TINY[@]}" -steps 1'
      echo 'echo "1 tiny step: ok"'
    } > "$WORK/prebuilt.sh"
    rc=0; run_stage prebuilt bash "$WORK/prebuilt.sh" || rc=$?
    if [ $rc = 0 ]; then
        BUILD_OK=1
        TRAIN_CU=$PREBUILT/train_gpt_cu; TEST_CU=$PREBUILT/test_gpt_cu; CHECK_ATTN=("$PREBUILT/test_attention")
        CUDNN_ATTN=$([ -e "$PREBUILT/cudnn_attention" ] && echo "$PREBUILT/cudnn_attention")
        [ $FAKE_ON = 1 ] || sed -n 's/^\(sources\|nvcc\|archs\|cudnn\|nccl\|built\) /prebuilt \1: /p' "$PREBUILT/MANIFEST" \
            >> "$CONFIG" 2>/dev/null
    fi
    record prebuilt "$(status_of $rc)" "$( [ $rc = 0 ] && echo "$PREBUILT: sources match, libraries found, 1 tiny step" || \
        echo "$(grep -m 1 -E '^FAIL|built from other|no .*MANIFEST|error' "$WORK/prebuilt.log" | cut -c1-110): rebuilding")"
fi
if [ $BUILD_OK = 1 ]; then skip build "not needed: the prebuilt binaries passed"
elif [ -z "$NVCC" ] && [ "$MODE" = run ]; then
    record build FAIL "nvcc not found: install the CUDA toolkit (or put nvcc on PATH)"
else
    rc=0; run_stage build bash -c "$BUILD_CMD" || rc=$?
    [ $rc = 0 ] && BUILD_OK=1
    { grep -m 1 '^NCCL' "$WORK/build.log"; grep -m 1 'cuDNN fused attention\|cuDNN attention off' "$WORK/build.log"; } >> "$CONFIG" 2>/dev/null
    record build "$(status_of $rc)" "$([ "$MODE" = rehearsal ] && echo "emulated binaries (cuemu), no MPI" || echo "sm_$CC_CAP only, warnings allowed, no MPI"); $(grep -m 1 -o 'cuDNN fused attention: on\|cuDNN attention off' "$WORK/build.log" 2>/dev/null)"
fi
NOBUILD="no binaries (prebuilt and build did not pass)"
READY=$([ $BUILD_OK = 1 ] && [ -f "$DATA" ] && echo 1 || echo 0)
NOTREADY="$NOBUILD or no data (python3 with numpy)"
# the benchmark recipe, as bench_torch_gpu.py runs it: constant LR, the shard in order, the same seed
BSEED=1337; BLR=1e-4
BARGS=("${SHAPE[@]}" -mb "$MB" -gb "$GB" -ramp off -lr $BLR -warmup 0 -decay 1000000000000 -tokens 10000000000000
       -i "$DATA" -j '' -shuffle 0 -seed $BSEED -peak "$PEAK")

# ---------------------------------------------------------------------------------------
# 3. the benchmark: train_gpt_cu as a user runs it (cuDNN when built), the own tensor-core
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
# 4. correctness: the attention kernels, the fixtures, test_gpt_cu
if ! not_selected attention; then
    if [ $BUILD_OK = 1 ]; then
        rc=0; run_stage attention "${CHECK_ATTN[@]}" "${ATTN_ARGS[@]+"${ATTN_ARGS[@]}"}" || rc=$?
        args="${ATTN_ARGS[*]+${ATTN_ARGS[*]}}"
        record attention "$(status_of $rc)" "$(basename "${CHECK_ATTN[0]}")${args:+ $args}: $(verdict "$WORK/attention.log")"
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
    cpu_build_wait
    if [ $BUILD_OK = 1 ] && [ $FIX_OK = 1 ] && [ $CPU_OK = 1 ]; then
        rc=0; run_stage tests env LLMC_TEST_LAYOUTS=0 LLMC_TRAIN_GPT=./train_gpt LLMC_TRAIN_GPT_CU="$TRAIN_CU" "$TEST_CU" fixtures || rc=$?
        record tests "$(status_of $rc)" "test_gpt_cu: $(verdict "$WORK/tests.log")"
    else skip tests "$( [ $BUILD_OK = 1 ] || echo "$NOBUILD; " )$( [ $FIX_OK = 1 ] || echo 'no fixtures; ' )$( [ $CPU_OK = 1 ] || \
        echo 'needs the CPU trainer (build_cpu did not pass)' )"; fi
fi

# ---------------------------------------------------------------------------------------
# 5. profile: step 2 alone under ncu (the trainer brackets it with cudaProfilerStart/Stop),
# kernel durations only, clocks left alone, with the trainer's NVTX ranges (step, "fwd L<l>",
# "bwd L<l>", "head fwd/bwd", "grad sync", "optimizer"): one report, read twice (by kernel
# name, and renamed to each kernel's innermost range), beside the cost model's per-class prediction
if ! not_selected profile; then
    if [ "$READY" != 1 ]; then skip profile "$NOTREADY"
    elif [ -z "$NCU" ]; then skip profile "ncu (Nsight Compute) not found: no measured per-kernel times"
    else
        { echo 'set -e'
          printf 'NCU=%q; PYK=%q; W=%q; EXE=%q\nARGS=(' "$NCU" "${PY:-python3}" "$WORK" "$TRAIN_CU"; printf ' %q' "${BARGS[@]}"; echo ' )'
          echo 'LLMC_PROFILE_STEP=2 "$NCU" --profile-from-start off --nvtx --clock-control none \'
          echo '    --metrics gpu__time_duration.sum -f -o "$W/ncu_step2" "$EXE" "${ARGS[@]}" -steps 2 > "$W/ncu_run.log" 2>&1'
          echo '"$NCU" --import "$W/ncu_step2.ncu-rep" --csv --print-units base --print-kernel-base function > "$W/ncu_step2.csv"'
          echo '"$NCU" --import "$W/ncu_step2.ncu-rep" --csv --print-units base --print-nvtx-rename kernel \'
          echo '    > "$W/ncu_step2_nvtx.csv" 2> "$W/ncu_nvtx.err" || echo "note: ncu could not rename by NVTX range"'
          echo "\"\$PYK\" dev/cuda/kernel_times.py --step \"\$W/ncu_step2.csv\" --nvtx \"\$W/ncu_step2_nvtx.csv\" \\"
          echo "    --pred dev/cuda/costmodel_pred.tsv --gpu $PGPU"
        } > "$WORK/profile.sh"
        rc=0; run_stage profile bash "$WORK/profile.sh" || rc=$?
        record profile "$(status_of $rc)" "$( [ $rc = 0 ] && grep -m 1 '^kernel time per step' "$WORK/profile.log" || echo "ncu failed or timed out (profile.log, ncu_run.log)")"
    fi
fi

# ---------------------------------------------------------------------------------------
# 6. compute-sanitizer on the own kernels (with cuDNN on it would check NVIDIA's attention)
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
# 7. PyTorch compiled, last, with what is left
torch_bench bench_torch_compiled 1
cpu_build_wait
