#!/usr/bin/env bash
# tests/test_gpu_rehearsal.sh - the dress rehearsal of the first GPU run (make gpu-rehearsal):
# dev/gpu_check.sh --rehearsal end to end on the CPU, the CUDA trainer and its tests under the
# emulation (cuemu) at tiny shapes, stand-ins for nvidia-smi, compute-sanitizer and ncu,
# PyTorch on the CPU. One stage is planted to fail (sanitizer_racecheck) and one to hang
# (bench_torch_compiled): they must be reported as FAIL and TIMEOUT, every other stage as a
# real run would (cudnn SKIP: the emulation has no cuDNN), the benchmark table, the
# configuration and the profile table printed, and the table and every log packed.
# Then the device command written in doc/gpu_check.md: every path it names exists, what it
# carries is ignored by git (tracked files travel anyway), the cuDNN frontend is tracked, and
# what would travel fits the device's 64 MiB. Ends with "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if [ "$1" = ok ]; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi; }
row() { awk -v s="$1" '/^stage +status/{t=1; next} t && $1 == s {print $2; exit}' "$tmp/out"; }
is() { [ "$(row "$1")" = "$2" ]; }

start=$(date +%s)
env -u OUT GPU_CHECK_WORK="$tmp/w" GPU_CHECK_OUT="$tmp/dest" GPU_CHECK_PLANT="sanitizer_racecheck:fail,bench_torch_compiled:hang" \
    bash dev/gpu_check.sh --rehearsal > "$tmp/out" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
sed -n '/^GPU check (rehearsal)/,$p' "$tmp/out"
echo
check "$([ $rc = 1 ] && echo ok)" "the planted failure makes the exit status 1 (rc $rc, ${secs} s)"
check "$(is sanitizer_racecheck FAIL && grep -q 'sanitizer_racecheck .*planted failure' "$tmp/out" && echo ok)" "planted failure: FAIL, with its message"
check "$(is bench_torch_compiled TIMEOUT && grep -q 'bench_torch_compiled TIMED OUT after' "$tmp/out" && echo ok)" "planted hang: TIMEOUT at its cap"
check "$(for s in build bench_cuda bench_cuda_tc bench_torch_eager attention fixtures tests sanitizer_memcheck profile; do is $s PASS || exit 1; done && echo ok)" "every real stage PASS"
check "$(is cudnn SKIP && grep -q 'cudnn .*the build has no cuDNN' "$tmp/out" && echo ok)" "no cuDNN in the emulation: cudnn SKIP with the reason"
check "$(grep -q '^stages: 9 PASS, 1 FAIL, 1 TIMEOUT, 1 SKIP' "$tmp/out" && echo ok)" "the count line: 9 PASS, 1 FAIL, 1 TIMEOUT, 1 SKIP"
check "$(grep -q 'bench_torch_eager .*losses agree (step 1: train_gpt_cu' "$tmp/out" && echo ok)" "PyTorch eager from the same weights: the step-1 losses agree"
check "$(grep -qE 'tests +PASS +test_gpt_cu: [0-9]+ passed, 0 failed' "$tmp/out" && echo ok)" "test_gpt_cu ran for real under the emulation"
check "$([ "$(sed -n '/^implementation/,/^---/p' "$tmp/out" | grep -cE ' [0-9]+\.[0-9] +[0-9]+ ')" = 3 ] && echo ok)" "benchmark table: two train_gpt_cu rows and PyTorch eager, with figures"
check "$(grep -q '^gemm: fused GELU forward epilogue: ' "$tmp/out" && grep -q '^gemm plan  0: m ' "$tmp/out" && grep -q '^| attention ' "$tmp/out" && echo ok)" "configuration: attention, fused epilogues, cuBLASLt algorithm per GEMM shape"
check "$(grep -q '^MEASURED (ncu, one step alone)' "$tmp/out" && echo ok)" "profile table printed"
t=$(tar tzf "$tmp/dest/gpu_check_logs.tgz" 2>/dev/null)
miss=""; for s in build bench_cuda bench_cuda_tc bench_torch_eager attention tests sanitizer_memcheck sanitizer_racecheck profile bench_torch_compiled; do
    grep -qx "./$s.log" <<< "$t" || miss="$miss $s.log"; done
check "$([ -z "$miss" ] && [ -s "$tmp/dest/gpu_check_table.txt" ] && [ -s "$tmp/dest/gpu_check_results.tsv" ] && echo ok)" "packed: table, results and every stage's log${miss:+ (missing:$miss)}"
check "$(grep -q 'bench_torch_compiled  *TIMEOUT' "$tmp/dest/gpu_check_table.txt" && echo ok)" "the packed table has the final rows"

# the device command of doc/gpu_check.md (lines "device-command:" and "device-carry:")
cmd=$(sed -n 's/^device-command: *`\(.*\)`.*$/\1/p' doc/gpu_check.md | head -n 1)
carry=$(sed -n 's/^device-carry: *`\(.*\)`.*$/\1/p' doc/gpu_check.md | head -n 1)
check "$([ -n "$cmd" ] && grep -qF "$cmd" README.md && echo ok)" "doc/gpu_check.md names the device command, and the README shows it ($cmd)"
bad=""; for w in $cmd; do case $w in */*|*.sh) [ -e "$w" ] || bad="$bad $w" ;; esac; done
for c in $carry; do [ -e "$c" ] || bad="$bad $c(carry, missing)"; git ls-files --error-unmatch "$c" > /dev/null 2>&1 && bad="$bad $c(carry, but tracked)"; done
check "$([ -z "$bad" ] && [ -n "$carry" ] && echo ok)" "every path the device command and its carry name exists; carried paths are untracked${bad:+ (bad:$bad)}"
check "$(git ls-files --error-unmatch third_party/cudnn_frontend/include/cudnn_frontend.h > /dev/null 2>&1 && echo ok)" "the cuDNN frontend headers are tracked: they travel with the tree"
kib=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -k --apparent-size 2>/dev/null | awk '{s += $1} END {print s + 0}')
ckib=$(du -sk --apparent-size $carry 2>/dev/null | awk '{s += $1} END {print s + 0}')
check "$([ $((kib + ckib)) -lt 60000 ] && echo ok)" "what travels ($((kib / 1024)) MiB tree + $((ckib / 1024)) MiB carried) fits the device's 64 MiB with room"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
