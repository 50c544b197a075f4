#!/usr/bin/env bash
# tests/test_gpu_rehearsal.sh - the dress rehearsal of the one-shot GPU run (make gpu-rehearsal):
# the device command of doc/gpu_check.md, as written there, run on the CPU in a copy of what the
# device gets (the tracked and untracked-but-not-ignored files, plus the carried paths), with
# GPU_CHECK_REHEARSAL=1: the CUDA trainer and its tests under the emulation (cuemu, no MPI, as on
# the device) at tiny shapes, stand-ins for nvidia-smi, compute-sanitizer and ncu, and the
# device's PyTorch 2.11 with numpy 2 on the CPU (a venv: TORCH_DEVICE_PY, make torch-device-venv).
#   run A: the prebuilt carry passes its check (here it holds emulated binaries with a MANIFEST),
#          so nothing is rebuilt; sanitizer_racecheck is planted to fail and bench_torch_compiled to
#          hang: FAIL and TIMEOUT, every other stage as a real run would (cudnn SKIP: no cuDNN).
#   run B: the carry holds the real sm_90 binaries of make gpu-prebuilt, which cannot run without a
#          GPU: prebuilt FAILs and the fallback rebuilds from source; the CPU trainer's build is
#          planted to fail, so only tests is skipped; fixtures are not carried, so dev/train_gpt.py
#          writes them under PyTorch 2.11.
# Before both: the command, carry and timeout of the doc (paths exist, the carry is untracked and
# fits 64 MiB with the tree, the timeout is the script's), and the real carry (its sources are this
# tree's, sm_90 without MPI, every library it needs found in the device's wheel folders, taken from
# the venv's wheels). Ends with "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if [ "$1" = ok ]; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi; }
row() { awk -v s="$1" '/^stage +status/{t=1; next} t && $1 == s {print $2; exit}' "$2"; }
is() { [ "$(row "$1" "$3")" = "$2" ]; }
PYD=${TORCH_DEVICE_PY:-$HOME/.cache/llmc/torch-device-venv/bin/python}
REHEARSAL_TIMEOUT=${REHEARSAL_TIMEOUT:-1300}

# ---------------------------------------------------------------------------------------------
# the device command of doc/gpu_check.md (lines "device-command:", "device-carry:", "device-timeout:")
cmd=$(sed -n 's/^device-command: *`\(.*\)`.*$/\1/p' doc/gpu_check.md | head -n 1)
carry=$(sed -n 's/^device-carry: *`\(.*\)`.*$/\1/p' doc/gpu_check.md | head -n 1)
dto=$(sed -n 's/^device-timeout: *`\([0-9]*\)`.*$/\1/p' doc/gpu_check.md | head -n 1)
check "$([ -n "$cmd" ] && grep -qF "$cmd" README.md && echo ok)" "doc/gpu_check.md names the device command, and the README shows it ($cmd)"
bad=""; for w in $cmd; do case $w in */*|*.sh) [ -e "$w" ] || bad="$bad $w" ;; esac; done
for c in $carry; do [ -e "$c" ] || bad="$bad $c(carry, missing)"; git ls-files --error-unmatch "$c" > /dev/null 2>&1 && bad="$bad $c(carry, but tracked)"; done
check "$([ -z "$bad" ] && [ -n "$carry" ] && echo ok)" "every path the device command and its carry ($carry) name exists; carried paths are untracked${bad:+ (bad:$bad)}"
check "$(grep -qx 'build/gpu_prebuilt' <<< "$(tr ' ' '\n' <<< "$carry")" && grep -qx 'fixtures' <<< "$(tr ' ' '\n' <<< "$carry")" && echo ok)" "the carry is the fixtures and the prebuilt binaries"
plan_dto=$(bash dev/gpu_check.sh --plan | sed -n 's/^device: start ~[0-9]* s + device-timeout \([0-9]*\) s.*/\1/p')
check "$([ -n "$dto" ] && [ "$dto" = "$plan_dto" ] && echo ok)" "device-timeout ${dto:-?} s is the script's (--plan: ${plan_dto:-?} s)"
check "$(git ls-files --error-unmatch third_party/cudnn_frontend/include/cudnn_frontend.h > /dev/null 2>&1 && echo ok)" "the cuDNN frontend headers are tracked: they travel with the tree"
kib=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -k --apparent-size 2>/dev/null | awk '{s += $1} END {print s + 0}')
ckib=$(du -sk --apparent-size $carry 2>/dev/null | awk '{s += $1} END {print s + 0}')
check "$([ $((kib + ckib)) -lt 60000 ] && echo ok)" "what travels ($((kib / 1024)) MiB tree + $((ckib / 1024)) MiB carried) fits the device's 64 MiB with room"

# the device's PyTorch and numpy (the rehearsal's python stages run under them)
ver=$("$PYD" -c 'import torch, numpy; print(torch.__version__.split("+")[0], numpy.__version__.split(".")[0])' 2>&1)
check "$([ "$ver" = "2.11.0 2" ] && echo ok)" "the venv has the device's torch 2.11.0 and numpy 2 ($PYD: $ver)"

# ---------------------------------------------------------------------------------------------
# the real carry: make gpu-prebuilt's binaries
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2> /dev/null)
P=build/gpu_prebuilt
if [ -n "$NVCC" ]; then
    check "$(bash dev/cuda/prebuilt.sh check $P > /dev/null && echo ok)" "$P: its MANIFEST's source hash is this tree's ($(bash dev/cuda/prebuilt.sh check $P))"
    check "$(grep -q '^archs sm_90 *$\|^archs sm_90 (asked' $P/MANIFEST && ! readelf -d $P/train_gpt_cu | grep -q 'libmpi' && echo ok)" "$P: sm_90 only, no MPI library"
    site=$("$PYD" -c 'import site; print(site.getsitepackages()[0])')
    # the device's rpaths, with its site-packages replaced by the venv's: every CUDA library resolves there
    ldp=$(readelf -d $P/train_gpt_cu | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p' | tr ':' '\n' | grep '/site-packages/' \
        | sed "s|^.*/site-packages|$site|" | tr '\n' ':')
    miss=""; for b in train_gpt_cu test_gpt_cu test_attention cudnn_attention; do
        [ -e $P/$b ] || continue
        env -i LD_LIBRARY_PATH="$ldp" ldd $P/$b > "$tmp/ldd" 2>&1
        for l in libcudnn.so.9 libnvrtc.so.13 libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
            if grep -q "^	$l " "$tmp/ldd"; then grep -q "^	$l => $site/nvidia/" "$tmp/ldd" || miss="$miss $b:$l"; fi
        done
    done
    check "$([ -z "$miss" ] && [ -n "$ldp" ] && echo ok)" "$P: every CUDA library the binaries need is found in the device's wheel folders (torch 2.11's wheels)${miss:+ (not:$miss)}"
else
    echo "note: nvcc not found: the real carry (make gpu-prebuilt) is NOT checked"
fi

# ---------------------------------------------------------------------------------------------
# a copy of what the device gets: tracked and untracked-but-not-ignored files, and the carry
mkcopy() {
    mkdir -p "$1"
    git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$1"
    local c; for c in $carry; do mkdir -p "$1/$(dirname "$c")"; cp -a "$c" "$1/$c"; done
}
# rehearse DIR OUTDIR ENV...: the device command as written, in DIR, with OUT set as the device does
rehearse() {
    local dir=$1 out=$2; shift 2
    mkdir -p "$out"
    local start; start=$(date +%s)
    (cd "$dir" && env -u GPU_CHECK_OUT -u GPU_CHECK_WORK OUT="$out" GPU_CHECK_REHEARSAL=1 GPU_CHECK_PY="$PYD" "$@" \
        timeout -k 10 "$REHEARSAL_TIMEOUT" bash -c "$cmd") > "$out.log" 2>&1
    echo "$? $(( $(date +%s) - start ))" > "$out.status"
    tar xzf "$out/gpu_check_logs.tgz" -C "$out" ./build.log ./prebuilt.log ./tests.log ./attention.log 2> /dev/null
}
leftovers() { # processes working in DIR or naming it (the run's), other than this test's own
    local p c
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
        c=$( { tr '\0' ' ' < "/proc/$p/cmdline"; } 2> /dev/null) || continue
        case "$(readlink "/proc/$p/cwd" 2> /dev/null)/ $c" in *"$1/"*) echo -n " $p:${c:0:60}" ;; esac
    done
}
returned() { # what comes back: at most 8 files under OUT, each under 16 MiB, and the three expected
    local n big
    n=$(find "$1" -maxdepth 1 -type f | wc -l)
    big=$(find "$1" -maxdepth 1 -type f -size +16M | wc -l)
    [ "$n" -le 8 ] && [ "$big" = 0 ] && [ -s "$1/gpu_check_table.txt" ] && [ -s "$1/gpu_check_results.tsv" ] && [ -s "$1/gpu_check_logs.tgz" ]
}

# Runs A and B side by side (each is mostly one process at a time, and the suite gives this test
# two cores), then the checks of A, then those of B.
# run A: the prebuilt carry passes (emulated binaries stand in for the sm_90 ones)
A=$tmp/a
mkcopy "$A"
rm -rf "${A:?}/$P"; mkdir -p "$A/$P"
cp build/cuda-emu-nompi/train_gpt_cu build/cuda-emu-nompi/test_gpt_cu build/cuda-emu/test_attention "$A/$P/"
(cd "$A" && bash dev/cuda/prebuilt.sh manifest $P > /dev/null)
# run B: the real sm_90 carry cannot run here (no GPU): the fallback rebuilds; the CPU trainer's
# build fails (planted): only tests is skipped; fixtures not carried: written under PyTorch 2.11
B=$tmp/b
mkcopy "$B"
rm -rf "${B:?}/fixtures"
# the fallback's kernel check is the suite's own emulated build of it (the same rule, up to date in the copy):
# B rebuilds the trainer and its tests, the stages it runs need nothing more
mkdir -p "$B/build/cuda-emu" && cp -a build/cuda-emu/test_attention "$B/build/cuda-emu/"
if [ -z "$NVCC" ]; then # no sm_90 binaries to carry: a broken one in their place
    rm -rf "${B:?}/$P"; mkdir -p "$B/$P"; cp -r "$A/$P/." "$B/$P/"; printf '\177ELF broken' > "$B/$P/train_gpt_cu"
fi
rehearse "$B" "$tmp/outB" GPU_CHECK_PLANT="build_cpu:fail" GPU_CHECK_ONLY="bench_cuda,bench_torch_eager,fixtures,tests" &
run_b=$!
rehearse "$A" "$tmp/outA" GPU_CHECK_PLANT="sanitizer_racecheck:fail,bench_torch_compiled:hang"
read -r rrc secs < "$tmp/outA.status"
T=$tmp/outA/gpu_check_table.txt
sed -n '/^GPU check (rehearsal)/,$p' "$tmp/outA.log"
echo
check "$([ $rrc = 1 ] && echo ok)" "A: the planted failure makes the exit status 1 (rc $rrc, ${secs} s)"
check "$(returned "$tmp/outA" && echo ok)" "A: what comes back: the table, the results and the logs, under the device's limits"
check "$(is prebuilt PASS "$T" && is build SKIP "$T" && grep -q 'build .*not needed: the prebuilt binaries passed' "$T" && echo ok)" "A: the prebuilt carry passes its check: nothing rebuilt"
check "$(grep -q '1 tiny step: ok' "$tmp/outA/prebuilt.log" && grep -q 'train_gpt_cu: every library found' "$tmp/outA/prebuilt.log" && echo ok)" "A: the prebuilt check ran -check, the libraries and one step"
check "$(is sanitizer_racecheck FAIL "$T" && grep -q 'sanitizer_racecheck .*planted failure' "$tmp/outA.log" && echo ok)" "A: planted failure: FAIL, with its message"
check "$(is bench_torch_compiled TIMEOUT "$T" && grep -q 'bench_torch_compiled TIMED OUT after' "$tmp/outA.log" && echo ok)" "A: planted hang: TIMEOUT at its cap"
check "$(for s in build_cpu bench_cuda bench_cuda_tc bench_torch_eager attention fixtures tests profile sanitizer_memcheck; do is $s PASS "$T" || exit 1; done && echo ok)" "A: every real stage PASS"
check "$(is cudnn SKIP "$T" && grep -q 'cudnn .*the build has no cuDNN' "$T" && echo ok)" "A: no cuDNN in the emulation: cudnn SKIP with the reason"
check "$(grep -q '^stages: 10 PASS, 1 FAIL, 1 TIMEOUT, 2 SKIP' "$T" && echo ok)" "A: the count line: 10 PASS, 1 FAIL, 1 TIMEOUT, 2 SKIP"
check "$(grep -q 'bench_torch_eager .*losses agree (step 1: train_gpt_cu' "$T" && grep -q '^pytorch eager (torch 2.11.0' "$T" && echo ok)" "A: PyTorch 2.11 eager from the same weights: the step-1 losses agree"
check "$(grep -qE 'tests +PASS +test_gpt_cu: [0-9]+ passed, 0 failed' "$T" && echo ok)" "A: test_gpt_cu ran for real under the emulation, against the CPU trainer built in the copy"
check "$([ "$(sed -n '/^implementation/,/^---/p' "$T" | grep -cE ' [0-9]+\.[0-9] +[0-9]+ ')" = 3 ] && echo ok)" "A: benchmark table: two train_gpt_cu rows and PyTorch eager, with figures"
check "$(grep -q '^gemm: fused GELU forward epilogue: ' "$T" && grep -q '^gemm plan  0: m ' "$T" && grep -q '^| attention ' "$T" && grep -q '^prebuilt sources: ' "$T" && echo ok)" "A: configuration: the prebuilt MANIFEST, attention, fused epilogues, cuBLASLt algorithm per GEMM shape"
check "$(grep -q '^MEASURED (ncu, one step alone)' "$T" && grep -q '^PER PHASE' "$T" && grep -q '^fwd layers ' "$T" && echo ok)" "A: profile table printed, with the per-phase (NVTX) table"
t=$(tar tzf "$tmp/outA/gpu_check_logs.tgz" 2>/dev/null)
miss=""; for s in prebuilt build_cpu bench_cuda bench_cuda_tc bench_torch_eager attention tests sanitizer_memcheck sanitizer_racecheck profile bench_torch_compiled; do
    grep -qx "./$s.log" <<< "$t" || miss="$miss $s.log"; done
check "$([ -z "$miss" ] && echo ok)" "A: every stage's log packed${miss:+ (missing:$miss)}"
left=$(leftovers "$A")
check "$([ -z "$left" ] && echo ok)" "A: no process of the run is left${left:+ (left:$left)}"
# A's tests stage is make cuda-nompi-emu-test (the same binaries, CUEMU_DEVICES=1, no layouts), so
# make test runs it only here: its own checks are printed for the suite to count, and the link check
check "$(! nm -C "$A/$P/train_gpt_cu" | grep -q ' U MPI_' && nm -C "$A/$P/train_gpt_cu" | grep -q ' T main' && echo ok)" "A: the no-MPI emulated build links no MPI (make cuda-nompi-emu-test's check)"
# (and its attention stage is test_attention's plain run, which make test's cuda-check-emu leaves to it)
tl=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/outA/tests.log" 2> /dev/null | tail -n 1)
al=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/outA/attention.log" 2> /dev/null | tail -n 1)
check "$([ -n "$tl" ] && [ -n "$al" ] && echo ok)" "A: tests.log and attention.log end with their counts (${tl:-none}; ${al:-none})"
echo "A: test_gpt_cu's and test_attention's own checks (its tests and attention stages; counted by the suite):"
echo "${tl:-0 passed, 1 failed}"
echo "${al:-0 passed, 1 failed}"

wait "$run_b"
read -r rrc secs < "$tmp/outB.status"
T=$tmp/outB/gpu_check_table.txt
sed -n '/^GPU check (rehearsal)/,/^stages:/p' "$tmp/outB.log"
echo
check "$([ $rrc = 1 ] && returned "$tmp/outB" && echo ok)" "B: exit status 1 (the planted CPU build failure), the files come back (rc $rrc, ${secs} s)"
check "$(is prebuilt FAIL "$T" && grep -q 'prebuilt .*rebuilding' "$T" && echo ok)" "B: the sm_90 carry fails its check here (no GPU): FAIL, rebuilding"
check "$(is build PASS "$T" && grep -q -- '-o build/cuda-emu-nompi/test_gpt_cu' "$tmp/outB/build.log" && grep -q 'build/cuda-emu-nompi/train_gpt_cu' "$tmp/outB/build.log" && echo ok)" "B: the fallback rebuilt the binaries from source (emulated, no MPI)"
check "$(is build_cpu FAIL "$T" && grep -q 'build_cpu .*planted failure' "$T" && echo ok)" "B: the planted CPU build failure: FAIL"
check "$(is tests SKIP "$T" && grep -q 'tests .*needs the CPU trainer' "$T" && echo ok)" "B: only tests, which runs the CPU trainer, is skipped for it"
check "$(is bench_cuda PASS "$T" && is bench_torch_eager PASS "$T" && echo ok)" "B: the benchmark runs on the rebuilt binaries, PyTorch 2.11 beside it"
check "$(is fixtures PASS "$T" && cmp -s <(head -c 1024 "$B/fixtures/fixture.bin") <(head -c 1024 fixtures/fixture.bin) && [ "$(stat -c %s "$B/fixtures/fixture.bin")" = "$(stat -c %s fixtures/fixture.bin)" ] && echo ok)" "B: dev/train_gpt.py wrote the fixtures under PyTorch 2.11 / numpy 2 (same header and size as the carried ones)"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
