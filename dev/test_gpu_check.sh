#!/usr/bin/env bash
# dev/test_gpu_check.sh - dev/gpu_check.sh's stage logic and final table without a GPU, in its
# dry-run mode (GPU_CHECK_FAKE: every stage command replaced by one with a chosen exit code):
# TIMEOUT, SKIP and FAIL land on the right rows, later stages SKIP after a failed build, QUICK=1
# skips what it should, a failing benchmark summary gives a row that says so, and the table is
# printed even when the script dies mid-way; the benchmark's step-1 loss comparison (train_gpt_cu
# vs PyTorch from the same weights) gives "losses agree" / "LOSSES DIFFER" and FAILs only beyond
# its tolerance. Ends with "N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if [ "$1" = ok ]; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi; }
# run ENV...: gpu_check in fake mode, output in $tmp/out, exit code in $rc
run() { rm -rf "$tmp/gc"; env GPU_CHECK_OUT="$tmp/gc" "$@" bash "$here/gpu_check.sh" > "$tmp/out" 2>&1; rc=$?; }
# row STAGE: the status word of STAGE in the final table
row() { awk -v s="$1" '/^stage +status/{t=1; next} t && $1 == s {print $2; exit}' "$tmp/out"; }
is() { [ "$(row "$1")" = "$2" ]; }
table() { grep -q '^GPU check: ' "$tmp/out" && grep -q 'NOT exercised here: NCCL between ranks' "$tmp/out" && echo ok; }

run GPU_CHECK_FAKE="attention:124,tests:1,sanitizer_racecheck:137"
check "$(is build PASS && echo ok)" "build PASS"
check "$(is attention TIMEOUT && echo ok)" "exit 124 is TIMEOUT, not FAIL"
check "$(is sanitizer_racecheck TIMEOUT && echo ok)" "exit 137 is TIMEOUT"
check "$(is tests FAIL && echo ok)" "exit 1 is FAIL"
check "$(is sanitizer_memcheck PASS && echo ok)" "later stages still run after a FAIL"
check "$(is layouts SKIP && echo ok)" "no mpirun: layouts SKIP"
check "$(grep -q 'layouts .*NOT done' "$tmp/out" && echo ok)" "the layouts row says it was not done"
check "$([ $rc != 0 ] && echo ok)" "a FAIL or TIMEOUT gives a non-zero exit (rc $rc)"
check "$(table)" "table printed, with what was not exercised"

run GPU_CHECK_FAKE="build:2"
check "$(is build FAIL && echo ok)" "failed build: FAIL"
check "$(for s in attention tests sanitizer_memcheck layouts kernels; do [ "$(row $s)" = SKIP ] || exit 1; done && echo ok)" "failed build: every later stage SKIP"
check "$(grep -c '^[a-z_]* *FAIL ' "$tmp/out" | grep -qx 1 && echo ok)" "failed build: the only FAIL row is the build"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_MPI=1 GPU_CHECK_FAKE_SUMMARY_FAIL=1
check "$(is layouts PASS && echo ok)" "with mpirun: layouts run"
check "$(grep -q 'summary failed' "$tmp/out" && echo ok)" "failing summary: the benchmark row says so"
check "$(table)" "failing summary: table printed"
check "$([ $rc = 0 ] && echo ok)" "all stages PASS: exit 0 (rc $rc)"

run GPU_CHECK_FAKE=
check "$(is bench_torch_eager PASS && is bench_torch_compiled PASS && grep -q 'bench_torch_eager .*losses agree (step 1: train_gpt_cu 10.9876 vs pytorch 10.9912' "$tmp/out" && echo ok)" "step-1 losses within bf16 tolerance: PASS, the row says they agree"
check "$(! grep -qi 'different weights' "$tmp/out" && echo ok)" "the table no longer says PyTorch starts from different weights"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=11.3
check "$(is bench_torch_eager FAIL && grep -q 'bench_torch_eager .*LOSSES DIFFER (step 1: train_gpt_cu 10.9876 vs pytorch 11.3000' "$tmp/out" && [ $rc != 0 ] && echo ok)" "step-1 losses 2.8e-2 apart: FAIL, LOSSES DIFFER, non-zero exit (rc $rc)"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=11.19
check "$(is bench_torch_eager PASS && echo ok)" "step-1 losses 1.8e-2 apart: within the 2e-2 tolerance"

run GPU_CHECK_FAKE="bench_cuda:1"
check "$(is bench_cuda FAIL && is bench_torch_eager PASS && grep -q 'bench_torch_eager .*not compared (train_gpt_cu did not pass)' "$tmp/out" && echo ok)" "train_gpt_cu failed: PyTorch rows say the loss was not compared, no second FAIL"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_TORCH_LOSS=
check "$(is bench_torch_eager PASS && grep -q 'bench_torch_eager .*step-1 loss not compared (IndexError' "$tmp/out" && echo ok)" "no PyTorch loss to compare: PASS with the reason, not FAIL"

run GPU_CHECK_FAKE= QUICK=1
check "$(is layouts SKIP && is kernels SKIP && is sanitizer_racecheck SKIP && is bench_cuda_flash SKIP && echo ok)" "QUICK=1: layouts, kernels, racecheck, CUDA-core bench SKIP"
check "$(is sanitizer_memcheck PASS && is attention PASS && is bench_cuda PASS && echo ok)" "QUICK=1: memcheck, attention, bench_cuda run"
check "$(grep -q 'of 175s, QUICK=1' "$tmp/out" && echo ok)" "QUICK=1: 175 s budget"

run GPU_CHECK_FAKE= GPU_CHECK_BUDGET=10
check "$(is build SKIP && is attention SKIP && echo ok)" "no time left: SKIP, not FAIL"
check "$(table)" "no time left: table printed"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_SANITIZER=0
check "$(is sanitizer_memcheck SKIP && grep -q 'compute-sanitizer not found' "$tmp/out" && echo ok)" "no compute-sanitizer: SKIP with the reason"

run GPU_CHECK_FAKE= GPU_CHECK_FAKE_ABORT=tests
check "$(table)" "script dies after tests: table still printed"
check "$(is tests PASS && [ -z "$(row layouts)" ] && echo ok)" "script dies after tests: rows up to tests"
check "$([ $rc = 9 ] && echo ok)" "script dies: its exit code is kept (rc $rc)"

# the profile stage's script, run for real with a stand-in ncu (on PATH as fake-ncu) that writes
# ncu's CSV: 1 init kernel + 3 kernels per step (2 us layernorm, 1 ms gemm, 0.5 ms flash)
run GPU_CHECK_FAKE=
mkdir -p "$tmp/bin"
cat > "$tmp/bin/fake-ncu" <<'EOF2'
#!/usr/bin/env bash
log=""; steps=0
while [ $# -gt 0 ]; do case $1 in --log-file) log=$2; shift ;; -steps) steps=$2; shift ;; esac; shift; done
/usr/bin/python3 - "$log" "$steps" <<'EOF3'
import sys; sys.path.insert(0, "dev/cuda"); from kernel_times import ncu_csv
n = int(sys.argv[2])
rows = [("init_weights_kernel", "5,000", "nsecond")] + [("void layernorm_forward_kernel<__nv_bfloat16>(int)", "2,000", "nsecond"), ("nvjet_tst_128x256", "1", "msecond"), ("flash_forward_kernel", "500", "usecond")] * n
open(sys.argv[1], "w").write(ncu_csv(rows))
EOF3
EOF2
chmod +x "$tmp/bin/fake-ncu"
prc=0; (cd "$here/.." && PATH="$tmp/bin:$PATH" bash "$tmp/gc/profile.sh") > "$tmp/prof" 2>&1 || prc=$?
check "$([ $prc = 0 ] && grep -q '^MEASURED' "$tmp/prof" && echo ok)" "profile script runs ncu twice and prints the measured/predicted table (rc $prc)"
check "$(awk '$1 == "gemm" {print $2}' "$tmp/prof" | grep -qx '1.000' && awk '$1 == "attention" {print $2}' "$tmp/prof" | grep -qx '0.500' && echo ok)" "one step's measured gemm 1.000 ms and attention 0.500 ms (2-step minus 1-step run)"
check "$(grep -q 'kernel time per step: measured 1.5 ms' "$tmp/prof" && echo ok)" "per-step kernel total 1.5 ms (init kernel cancels)"
run GPU_CHECK_FAKE= GPU_CHECK_FAKE_NCU=0
check "$(is profile SKIP && grep -q 'ncu (Nsight Compute) not found' "$tmp/out" && echo ok)" "no ncu: profile SKIP with the reason"
run GPU_CHECK_FAKE= QUICK=1
check "$(is profile SKIP && echo ok)" "QUICK=1: profile SKIP"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
