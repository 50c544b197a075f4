#!/usr/bin/env bash
# asan.sh: the attack families of the run's lifecycle (record, resume, signals, blends, ckpt) with
# the trainer itself built under AddressSanitizer + UBSan (`make train_gpt_asan`: one process, no
# MPI, no OpenMP, so the families' MPI cases are left out). Every sanitizer report goes to a file
# (ASAN_OPTIONS / UBSAN_OPTIONS log_path); one report, or a failed case, fails the run. Leaks
# are reported too (a process that exits through die() keeps what it holds reachable, so only a
# real leak shows). Prints the families' counts, then "N passed, M failed" (their cases plus one
# for "no report").
#   bash tests/attack/asan.sh                  the five families
#   bash tests/attack/asan.sh record resume    some of them
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="$ROOT/train_gpt_asan"
if [ ! -x "$BIN" ]; then
  echo "FAIL setup: $BIN is missing (make train_gpt_asan)"; echo "0 passed, 1 failed"; exit 1
fi
REP="$(mktemp -d "${TMPDIR:-/tmp}/asan_reports.XXXXXX")"
trap 'rm -rf "$REP"' EXIT
export ASAN_OPTIONS="log_path=$REP/asan:detect_leaks=1"
export UBSAN_OPTIONS="log_path=$REP/ubsan:print_stacktrace=1:halt_on_error=1"
export ATTACK_NO_MPI=1 ATTACK_ASAN_BIN="$BIN" BIN="$BIN" TRAIN="$BIN"
[ $# -gt 0 ] || set -- record resume signals blends ckpt
out="$(bash "$ROOT/tests/attack/run.sh" "$@" 2>&1)"
rc=$?
echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
last="$(echo "$out" | tail -n 1)"
p=0; f=1
[[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && { p=${BASH_REMATCH[1]}; f=${BASH_REMATCH[2]}; }
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
n=$(find "$REP" -type f | wc -l)
if [ "$n" -eq 0 ]; then
  echo "PASS no sanitizer report from any run of the trainer"; p=$((p + 1))
else
  echo "FAIL $n sanitizer report(s); the first:"; f=$((f + 1))
  head -n 40 "$(find "$REP" -type f | head -n 1)"
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
