# lib.sh: shared helpers of the attack families (sourced, not run). A case runs one
# command under a timeout and classifies it: a crash (signal, sanitizer report), a hang
# (timeout), a wrong exit status or a missing one-line `error:` message is a FAIL.
# Each family ends with `attack_done`, which prints "N passed, M failed" and sets the
# exit status.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TRAIN="${TRAIN:-$ROOT/train_gpt}"
CASE_TIMEOUT="${CASE_TIMEOUT:-30}"
PASS=0; FAIL=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/attack.XXXXXX")"
trap 'chmod -R u+rwx "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
# the tiny preset at -seq 32 on the KJV vocabulary: a step takes ~0.1 s on one core
TINY=(-seq 32 -V 8192 -gb 4 -ramp off -threads 1)

pass() { PASS=$((PASS + 1)); echo "PASS $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# run_case CMD...: runs it, leaves RC, OUT (stdout file) and ERR (stderr file)
run_case() {
  OUT="$WORK/out.txt"; ERR="$WORK/err.txt"
  timeout -k 5 "$CASE_TIMEOUT" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
}

# classify: common crash/hang checks; prints a reason and returns 1 when bad
bad_run() {
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then echo "hang (timeout ${CASE_TIMEOUT}s)"; return 0; fi
  if [ "$RC" -ge 128 ]; then echo "crash (signal $((RC - 128)))"; return 0; fi
  if grep -q "Sanitizer\|runtime error:\|Segmentation\|core dumped\|Assertion" "$ERR"; then echo "sanitizer/crash report: $(grep -m1 "Sanitizer\|runtime error:\|Segmentation\|Assertion" "$ERR")"; return 0; fi
  return 1
}

# expect_err NAME [PATTERN] -- CMD...: non-zero exit, a line "error: ..." on stderr
# (exactly one, matching PATTERN, an extended regex, if given) and no training step
# printed before it (unless ALLOW_STEPS=1).
expect_err() {
  local name="$1"; shift
  local pat=""
  if [ "$1" != "--" ]; then pat="$1"; shift; fi
  shift # --
  run_case "$@"
  local why
  if why="$(bad_run)"; then fail "$name" "$why"; return; fi
  if [ "$RC" -eq 0 ]; then fail "$name" "exit 0 (silently accepted)"; return; fi
  if ! grep -q "^error: " "$ERR"; then fail "$name" "exit $RC without an 'error:' line (stderr: $(head -c 200 "$ERR" | tr '\n' ' '))"; return; fi
  if [ "$(grep -c "^error: " "$ERR")" -ne 1 ]; then fail "$name" "more than one error line"; return; fi
  if [ -n "$pat" ] && ! grep -Eq -e "$pat" "$ERR"; then fail "$name" "message does not match /$pat/: $(grep -m1 '^error: ' "$ERR")"; return; fi
  # bad input is caught before training starts (ALLOW_STEPS=1 for failures that happen mid-run)
  if [ -z "${ALLOW_STEPS:-}" ] && grep -q "^step " "$OUT"; then fail "$name" "trained before failing"; return; fi
  pass "$name"
}

# expect_ok NAME -- CMD...: exit 0, nothing on stderr that looks like a crash
expect_ok() {
  local name="$1"; shift; shift # --
  run_case "$@"
  local why
  if why="$(bad_run)"; then fail "$name" "$why"; return; fi
  if [ "$RC" -ne 0 ]; then fail "$name" "exit $RC: $(head -c 200 "$ERR" | tr '\n' ' ')"; return; fi
  pass "$name"
}

attack_done() {
  echo "$PASS passed, $FAIL failed"
  [ "$FAIL" -eq 0 ]
}
