#!/usr/bin/env bash
# run.sh: the attack suite. Runs every tests/attack/family_*.sh (each prints PASS/FAIL
# lines and ends with "N passed, M failed"), prints one count line per family and a
# final "N passed, M failed"; exits non-zero if any case or family failed.
#   bash tests/attack/run.sh                 every family
#   bash tests/attack/run.sh flags shards    only these families
#   VERBOSE=1 ...                          also print the PASS lines
# TRAIN=path selects the binary (default ./train_gpt, built by `make attack`).
set -u
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
DIR="$(cd "$(dirname "$0")" && pwd)"
FAMILY_TIMEOUT="${FAMILY_TIMEOUT:-900}"
families=()
if [ $# -gt 0 ]; then for f in "$@"; do families+=("$DIR/family_$f.sh"); done
else for f in "$DIR"/family_*.sh; do [ -e "$f" ] && families+=("$f"); done; fi
tp=0; tf=0; summary=()
for f in "${families[@]}"; do
  name="$(basename "$f" .sh)"; name="${name#family_}"
  log="$(mktemp "${TMPDIR:-/tmp}/attack_$name.XXXXXX")"
  t0=$(date +%s)
  timeout -k 10 "$FAMILY_TIMEOUT" bash "$f" >"$log" 2>&1
  rc=$?
  dt=$(( $(date +%s) - t0 ))
  last="$(tail -n 1 "$log")"
  if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then p=${BASH_REMATCH[1]}; m=${BASH_REMATCH[2]}
  else p=0; m=1; echo "FAIL family $name: no final count (exit $rc, timeout ${FAMILY_TIMEOUT}s?)"; fi
  if [ "$rc" -ne 0 ] && [ "$m" -eq 0 ]; then m=1; echo "FAIL family $name: exit $rc with 0 failures counted"; fi
  if [ "${VERBOSE:-0}" = 1 ]; then cat "$log"; else grep -v '^PASS ' "$log" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'; fi
  rm -f "$log"
  summary+=("$(printf '  %-10s %5d passed, %d failed  (%ds)' "$name" "$p" "$m" "$dt")")
  tp=$((tp + p)); tf=$((tf + m))
done
echo "attack suite, per family:"
for s in "${summary[@]}"; do echo "$s"; done
echo "$tp passed, $tf failed"
[ "$tf" -eq 0 ]
