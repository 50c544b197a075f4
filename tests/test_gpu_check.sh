#!/usr/bin/env bash
# tests/test_gpu_check.sh - dev/gpu_check.sh's stage logic, table and packing without a GPU, in
# its dry-run mode (GPU_CHECK_FAKE: every stage command replaced by one with a chosen exit
# code; GPU_CHECK_PLANT: one that hangs, or leaves a process in a process group of its own):
# TIMEOUT, SKIP and FAIL land on the right rows, only a FAIL makes the exit status non-zero,
# the prebuilt binaries or else the rebuild, a failed CPU build skipping only what needs it, later
# stages SKIP without binaries, the profile's reserved slice, every process of a timed-out stage
# gone, the step-1 loss comparison, GPU_CHECK_ONLY, the table and the packed logs on every exit
# (a stage failing, the script dying, SIGTERM in the middle of a stage), and --plan's one-shot
# arithmetic. The rehearsal on the emulated binaries is tests/test_gpu_rehearsal.sh.
# Ends with "N passed, M failed".
set -u
here=$(cd "$(dirname "$0")/../dev" && pwd)  # gpu_check.sh, the script under test
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if [ "$1" = ok ]; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi; }
# run ENV...: gpu_check in fake mode, output in $tmp/out, exit code in $rc, packed files in $tmp/dest
run() {
    rm -rf "$tmp/w" "$tmp/dest"
    env -u OUT GPU_CHECK_WORK="$tmp/w" GPU_CHECK_OUT="$tmp/dest" "$@" bash "$here/gpu_check.sh" > "$tmp/out" 2>&1; rc=$?
}
# row STAGE: the status word of STAGE in the final table
row() { awk -v s="$1" '/^stage +status/{t=1; next} t && $1 == s {print $2; exit}' "$tmp/out"; }
is() { [ "$(row "$1")" = "$2" ]; }
all_are() { local want=$1 s; shift; for s in "$@"; do is "$s" "$want" || return 1; done; }
table() { grep -q '^GPU check (run): ' "$tmp/out" && grep -q 'NOT exercised here: NCCL or MPI between ranks' "$tmp/out" && echo ok; }
packed() { # the three files, the table file with the same rows as the printed one, the logs in the archive
    [ -s "$tmp/dest/gpu_check_table.txt" ] && [ -s "$tmp/dest/gpu_check_results.tsv" ] && [ -s "$tmp/dest/gpu_check_logs.tgz" ] || return 1
    [ "$(ls "$tmp/dest" | wc -l)" = 3 ] || return 1
    local t; t=$(tar tzf "$tmp/dest/gpu_check_logs.tgz") || return 1
    for f in "$@"; do grep -qx "./$f" <<< "$t" || return 1; done
    diff <(grep -E '^[a-z_]+ +(PASS|FAIL|TIMEOUT|SKIP) ' "$tmp/out") <(grep -E '^[a-z_]+ +(PASS|FAIL|TIMEOUT|SKIP) ' "$tmp/dest/gpu_check_table.txt") > /dev/null
}
LATER="bench_cuda bench_cuda_tc bench_torch_eager attention cudnn tests profile sanitizer_memcheck sanitizer_racecheck bench_torch_compiled"

run GPU_CHECK_FAKE="attention:124,tests:1,sanitizer_racecheck:137"
check "$(is prebuilt PASS && is build SKIP && grep -q 'build .*not needed: the prebuilt binaries passed' "$tmp/out" && echo ok)" "prebuilt PASS: no rebuild (build SKIP, with the reason)"
check "$(is build_cpu PASS && echo ok)" "build_cpu (in the background) PASS"
check "$(is attention TIMEOUT && echo ok)" "exit 124 is TIMEOUT, not FAIL"
check "$(is sanitizer_racecheck TIMEOUT && echo ok)" "exit 137 is TIMEOUT"
check "$(is tests FAIL && echo ok)" "exit 1 is FAIL"
check "$(is sanitizer_memcheck PASS && is profile PASS && echo ok)" "later stages still run after a FAIL"
check "$([ $rc = 1 ] && echo ok)" "a FAIL gives exit status 1 (rc $rc)"
check "$(grep -q '^stages: .* 1 FAIL, 2 TIMEOUT' "$tmp/out" && echo ok)" "the count line names the FAIL and both TIMEOUTs"
check "$(table)" "table printed, with what was not exercised"
check "$(packed results.tsv prebuilt.log build_cpu.log attention.log tests.log profile.log && echo ok)" "table, results and every log packed into GPU_CHECK_OUT"

run GPU_CHECK_FAKE="attention:124,profile:137"
check "$([ $rc = 0 ] && is attention TIMEOUT && is profile TIMEOUT && echo ok)" "TIMEOUTs alone: reported, exit status 0 (rc $rc)"

# the prebuilt binaries fail their check: rebuilt from source, and everything runs on the rebuild
run GPU_CHECK_FAKE="prebuilt:1"
check "$(is prebuilt FAIL && is build PASS && grep -q 'prebuilt .*rebuilding' "$tmp/out" && echo ok)" "prebuilt FAIL: rebuilt (build PASS), the row says so"
check "$(all_are PASS $LATER && echo ok)" "prebuilt FAIL: every later stage runs on the rebuilt binaries"
run GPU_CHECK_FAKE="prebuilt:1,build:2"
check "$(is prebuilt FAIL && is build FAIL && echo ok)" "prebuilt and rebuild failed: both FAIL"
check "$(all_are SKIP $LATER && echo ok)" "no binaries: every stage that needs them SKIP"
check "$(is build_cpu PASS && [ "$(grep -c '^[a-z_]* *FAIL ' "$tmp/out")" = 2 ] && echo ok)" "no binaries: the CPU build still reported; the only FAIL rows are prebuilt and build"
rm -rf "$tmp/noprebuilt"
run GPU_CHECK_PREBUILT="$tmp/noprebuilt" GPU_CHECK_FAKE=
check "$(is prebuilt PASS && echo ok)" "dry run: the prebuilt folder is not looked at (fake rows only)"

# the CPU trainer does not build: only tests (which runs it) is skipped
run GPU_CHECK_FAKE="build_cpu:2"
check "$(is build_cpu FAIL && is tests SKIP && grep -q 'tests .*needs the CPU trainer (build_cpu did not pass)' "$tmp/out" && echo ok)" "CPU build FAIL: tests SKIP with the reason"
check "$(all_are PASS bench_cuda bench_cuda_tc bench_torch_eager attention cudnn fixtures profile sanitizer_memcheck sanitizer_racecheck bench_torch_compiled && echo ok)" "CPU build FAIL: every other stage PASS"
check "$([ $rc = 1 ] && echo ok)" "CPU build FAIL: exit status 1 (rc $rc)"
run GPU_CHECK_FAKE= GPU_CHECK_PLANT=build_cpu:hang GPU_CHECK_CAPS=build_cpu:3
check "$(is build_cpu TIMEOUT && is tests SKIP && is bench_cuda PASS && echo ok)" "CPU build hangs: TIMEOUT at its cap, tests SKIP, the rest runs"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_SUMMARY_FAIL=1
check "$(grep -q 'summary failed' "$tmp/out" && echo ok)" "failing summary: the benchmark row says so"
check "$([ $rc = 0 ] && table)" "failing summary: table printed, exit 0 (rc $rc)"

run GPU_CHECK_FAKE=
check "$(is bench_torch_eager PASS && is bench_torch_compiled PASS && grep -q 'bench_torch_eager .*losses agree (step 1: train_gpt_cu 10.9876 vs pytorch 10.9912' "$tmp/out" && echo ok)" "step-1 losses within bf16 tolerance: PASS, the row says they agree"
check "$(grep -c '^[a-z_]* *PASS ' "$tmp/out" | grep -qx 13 && is build SKIP && [ $rc = 0 ] && echo ok)" "thirteen stages PASS, build SKIP (not needed), exit 0 (rc $rc)"
check "$(grep -q '^configuration used' "$tmp/out" || echo ok)" "no configuration section without a real build log"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=11.3
check "$(is bench_torch_eager FAIL && grep -q 'bench_torch_eager .*LOSSES DIFFER (step 1: train_gpt_cu 10.9876 vs pytorch 11.3000' "$tmp/out" && [ $rc != 0 ] && echo ok)" "step-1 losses 2.8e-2 apart: FAIL, LOSSES DIFFER, non-zero exit (rc $rc)"
run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=11.19
check "$(is bench_torch_eager PASS && echo ok)" "step-1 losses 1.8e-2 apart: within the 2e-2 tolerance"
run GPU_CHECK_FAKE="bench_cuda:1"
check "$(is bench_cuda FAIL && is bench_torch_eager PASS && grep -q 'bench_torch_eager .*not compared (train_gpt_cu did not pass)' "$tmp/out" && echo ok)" "train_gpt_cu failed: PyTorch rows say the loss was not compared, no second FAIL"
run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=
check "$(is bench_torch_eager PASS && grep -q 'bench_torch_eager .*step-1 loss not compared (IndexError' "$tmp/out" && echo ok)" "no PyTorch loss to compare: PASS with the reason, not FAIL"

run GPU_CHECK_FAKE= GPU_CHECK_BUDGET=3
check "$(is prebuilt SKIP && is bench_cuda SKIP && grep -q 'no time left' "$tmp/w/prebuilt.log" && [ $rc = 0 ] && echo ok)" "no time left: SKIP, not FAIL (rc $rc)"
run GPU_CHECK_FAKE= GPU_CHECK_FAKE_SANITIZER=0
check "$(is sanitizer_memcheck SKIP && grep -q 'compute-sanitizer not found' "$tmp/out" && echo ok)" "no compute-sanitizer: SKIP with the reason"
run GPU_CHECK_FAKE= GPU_CHECK_FAKE_NCU=0
check "$(is profile SKIP && grep -q 'ncu (Nsight Compute) not found' "$tmp/out" && echo ok)" "no ncu: profile SKIP with the reason"
run GPU_CHECK_FAKE= GPU_CHECK_ONLY=bench_cuda,profile
check "$(is prebuilt PASS && is build_cpu PASS && is bench_cuda PASS && is profile PASS && is tests SKIP && is bench_cuda_tc SKIP && grep -q 'tests .*not in GPU_CHECK_ONLY' "$tmp/out" && echo ok)" "GPU_CHECK_ONLY: the binaries and the named stages only"

# the profile's slice is reserved: a stage before it that hangs is cut so that the profile still runs
run GPU_CHECK_FAKE= GPU_CHECK_PLANT=tests:hang GPU_CHECK_CAPS=tests:60,profile:8 GPU_CHECK_BUDGET=22
t=$(sed -n 's/^TIMED OUT after \([0-9]*\)s$/\1/p' "$tmp/w/tests.log")
check "$(is tests TIMEOUT && [ -n "$t" ] && [ "$t" -le 14 ] && is profile PASS && echo ok)" "reserved slice: the hanging tests stage cut at ${t:-?} s (<= 22 - 8), profile PASS after it"

# a stage whose command leaves a process in a process group of its own (a nested timeout, as in
# test_gpt.cu): at its TIMEOUT every process of the stage is gone
run GPU_CHECK_FAKE= GPU_CHECK_PLANT=tests:escape GPU_CHECK_CAPS=tests:6
sleep 0.5
check "$(is tests TIMEOUT && grep -q 'planted escape' "$tmp/w/tests.log" && echo ok)" "escaping stage: TIMEOUT at its cap"
check "$(pgrep -f 'sleep 100003' > /dev/null || echo ok)" "escaping stage: its nested timeout's process is gone too (the stage's session killed)"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_ABORT=tests
check "$(table)" "script dies after tests: table still printed"
check "$(is tests PASS && is profile SKIP && grep -q 'profile .*not reached' "$tmp/out" && echo ok)" "script dies after tests: the rest SKIP, not reached"
check "$([ $rc = 9 ] && echo ok)" "script dies: its exit code is kept (rc $rc)"
check "$(packed tests.log && echo ok)" "script dies: the logs are packed"

# SIGTERM in the middle of a hanging stage: the stage is TIMEOUT, its child is gone, all packed
rm -rf "$tmp/w" "$tmp/dest"
env -u OUT GPU_CHECK_WORK="$tmp/w" GPU_CHECK_OUT="$tmp/dest" GPU_CHECK_FAKE= GPU_CHECK_PLANT=tests:hang \
    bash "$here/gpu_check.sh" > "$tmp/out" 2>&1 &
gc=$!
# (up to 60 s: on a loaded machine the stages before it take a while)
for _ in $(seq 600); do grep -q 'tests (cap' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -TERM $gc; wait $gc; rc=$?
check "$([ $rc = 143 ] && echo ok)" "SIGTERM: exit 143 (rc $rc)"
check "$(is tests TIMEOUT && grep -q 'tests .*killed by SIGTERM' "$tmp/out" && is sanitizer_memcheck SKIP && echo ok)" "SIGTERM: the running stage TIMEOUT, the rest SKIP"
check "$(packed tests.log bench_cuda.log && echo ok)" "SIGTERM: table and logs packed"
check "$(pgrep -f 'sleep 100000' > /dev/null || echo ok)" "SIGTERM: the hanging stage's process is gone"

# the plan: every stage; one shot = start + device timeout <= 8 minutes; the stages up to the
# sanitizers within the deadline; the deadline and packing within the device timeout
bash "$here/gpu_check.sh" --plan > "$tmp/plan" 2>&1; prc=$?
seq=$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ && $1 != "build" && $1 != "build_cpu" && $1 != "bench_torch_compiled" {s += $2} END {print s}' "$tmp/plan")
budget=$(sed -n 's/.*within the deadline of \([0-9]*\) s.*/\1/p' "$tmp/plan")
start=$(sed -n 's/^device: start ~\([0-9]*\) s + device-timeout \([0-9]*\) s.*/\1/p' "$tmp/plan")
dto=$(sed -n 's/^device: start ~\([0-9]*\) s + device-timeout \([0-9]*\) s.*/\2/p' "$tmp/plan")
check "$([ $prc = 0 ] && grep -q "sanitizer_racecheck ${seq} s of caps" "$tmp/plan" && [ "$seq" -le "$budget" ] && echo ok)" "--plan: prebuilt and the stages to the sanitizers: $seq s of caps <= the deadline ${budget:-?} s"
check "$([ -n "$dto" ] && [ $((start + dto)) -le 480 ] && [ "$start" -ge 120 ] && [ $((budget + 15)) -le "$dto" ] && echo ok)" "--plan: start ${start:-?} s + device timeout ${dto:-?} s <= 480 s; deadline + 15 s of packing within the device timeout"
check "$([ "$(awk 'NR > 1 && $2 ~ /^[0-9]+$/' "$tmp/plan" | wc -l)" = 14 ] && echo ok)" "--plan lists the fourteen stages"
bash "$here/gpu_check.sh" --bogus > "$tmp/bad" 2>&1; brc=$?
check "$([ $brc = 2 ] && grep -q "unknown argument '--bogus'" "$tmp/bad" && echo ok)" "unknown argument: one line, exit 2"

# $OUT (the folder the device machine sends back) is the default destination
rm -rf "$tmp/w" "$tmp/o"; mkdir -p "$tmp/o"
env -u GPU_CHECK_OUT OUT="$tmp/o" GPU_CHECK_WORK="$tmp/w" GPU_CHECK_FAKE= bash "$here/gpu_check.sh" > /dev/null 2>&1
check "$([ -s "$tmp/o/gpu_check_logs.tgz" ] && [ -s "$tmp/o/gpu_check_table.txt" ] && echo ok)" "\$OUT is where the packed files go by default"

# the profile stage's script, run for real with a stand-in ncu: profiling (-o) must be step 2 alone
# with NVTX on; the report is read twice, by kernel name and renamed to each kernel's NVTX range:
# 2 us layernorm, 1 ms gemm, 0.5 ms flash in layers 0 and 1 and the head
run GPU_CHECK_FAKE=
mkdir -p "$tmp/bin"
cat > "$tmp/bin/fake-ncu" <<'EOF2'
#!/usr/bin/env bash
out=""; imp=""; from=on; nvtx=0; rename=none
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift ;; --import) imp=$2; shift ;; --profile-from-start) from=$2; shift ;;
    --print-nvtx-rename) rename=$2; shift ;; --nvtx) nvtx=1 ;; esac; shift; done
if [ -n "$imp" ]; then
/usr/bin/python3 - "$imp" "$rename" <<'EOF3'
import sys, json; sys.path.insert(0, "dev/cuda"); from kernel_times import ncu_csv
rows = json.load(open(sys.argv[1]))
sys.stdout.write(ncu_csv([(r[1] if sys.argv[2] == "kernel" else r[0], r[2], r[3]) for r in rows]))
EOF3
exit
fi
[ "$from" = off ] && [ "$nvtx" = 1 ] && [ "${LLMC_PROFILE_STEP:-}" = 2 ] && [ -n "$out" ] || { echo "fake-ncu: expected --profile-from-start off, --nvtx, -o and LLMC_PROFILE_STEP=2"; exit 1; }
/usr/bin/python3 - "$out.ncu-rep" <<'EOF3'
import sys, json
rows = [("void layernorm_forward_kernel<__nv_bfloat16>(int)", "fwd L0", "2,000", "nsecond"), ("nvjet_tst_128x256", "fwd L1", "1", "msecond"),
        ("flash_forward_kernel", "head fwd", "500", "usecond")]
json.dump(rows, open(sys.argv[1], "w"))
EOF3
EOF2
chmod +x "$tmp/bin/fake-ncu"
prc=0; (cd "$here/.." && PATH="$tmp/bin:$PATH" bash "$tmp/w/profile.sh") > "$tmp/prof" 2>&1 || prc=$?
check "$([ $prc = 0 ] && grep -q '^MEASURED (ncu, one step alone)' "$tmp/prof" && echo ok)" "profile script runs ncu on step 2 alone and prints the measured/predicted table (rc $prc)"
check "$(awk '$1 == "gemm" {print $2}' "$tmp/prof" | grep -qx '1.000' && awk '$1 == "attention" {print $2}' "$tmp/prof" | grep -qx '0.500' && echo ok)" "one step's measured gemm 1.000 ms and attention 0.500 ms"
check "$(grep -q '^PER PHASE' "$tmp/prof" && awk '$1 == "fwd" && $2 == "layers" {print $3, $5, $6}' "$tmp/prof" | grep -qx '1.002 2 0.501' && awk '$1 == "head" {print $3}' "$tmp/prof" | grep -qx '0.500' && echo ok)" "per phase: fwd layers 1.002 ms over 2 layers (0.501 each), head fwd 0.500 ms"
check "$(grep -q 'kernel time per step: measured 1.5 ms' "$tmp/prof" && echo ok)" "per-step kernel total 1.5 ms"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
