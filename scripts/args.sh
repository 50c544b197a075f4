# shellcheck shell=bash
# args.sh: the command line of every script in scripts/, sourced first. A script's settings
# are environment variables, listed in its opening comment; its only argument is -h (or
# --help), which prints that comment. Anything else is refused before any work, so a
# mistyped option never starts, or overwrites, a run.
#   source scripts/args.sh && llmc_args "${BASH_SOURCE[0]}" "$@"
llmc_args() {
  local script=$1 a
  shift
  for a in "$@"; do
    case "$a" in
      -h | --help)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$script"
        exit 0
        ;;
      *)
        echo "$(basename "$script"): unknown argument '$a': settings are environment variables (see -h)" >&2
        exit 2
        ;;
    esac
  done
}

# run rather than sourced (bash scripts/args.sh -h): the comment above, or why there is nothing to run
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  llmc_args "$0" "$@"
  echo "$(basename "$0"): sourced by the scripts in scripts/, not run (see -h)" >&2
  exit 2
fi
