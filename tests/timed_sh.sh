#!/bin/bash
# timed_sh.sh: make's SHELL while `make test` builds its binaries (make test-bins): runs each
# recipe line as /bin/sh would and appends "seconds<TAB>target<TAB>command" to
# build/suite/build_times.tsv, the target being the line's -o argument (else its first word),
# so tests/suite.py can print the seconds per build step beside the tests'.
t0=$(date +%s.%N)
/bin/sh "$@"
rc=$?
t1=$(date +%s.%N)
cmd="${*: -1}"
out=$(printf '%s\n' "$cmd" | grep -oE '(^| )-o +[^ ]+' | tail -n 1 | sed -E 's/^ ?-o +//')
# a line without -o under a second ($(shell ...) probes, mkdir, echo) is not a build step
if [ -z "$out" ]; then
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 1) }' && exit $rc
    out=$(printf '%s\n' "$cmd" | head -n 1 | awk '{n = split($1, p, "/"); print p[n], $2}')
fi
mkdir -p build/suite 2>/dev/null
line=$(awk -v a="$t0" -v b="$t1" -v o="$out" -v c="$(printf '%s' "$cmd" | tr '\t\n' '  ' | cut -c1-200)" \
    'BEGIN { printf "%.2f\t%s\t%s", b - a, o, c }')
printf '%s\n' "$line" >> build/suite/build_times.tsv
exit $rc
