#!/usr/bin/env bash
# Checks the C tokenizer (llmc/host/tokenizer.h) against the KJV data: builds the data if
# needed (prepare_kjv.py is a no-op when up to date), compiles tests/data/tokenizer_check.c
# with warnings as errors (and sanitizers where the compiler has them, so a bad read
# in the corrupt-file tests fails loudly instead of passing by luck), checks the header
# also compiles as C++ and with nvcc if present (it is included from .cu files), and runs the check.
# The last line of output is "N passed, M failed"; exit status is non-zero on failure.
#
# usage: bash tests/data/test_tokenizer.sh [DATA_DIR]     (default dev/data/kjv)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="${1:-$ROOT/dev/data/kjv}"
CC="${CC:-cc}"
BUILD="$ROOT/build"
mkdir -p "$BUILD"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

/usr/bin/python3 "$ROOT/dev/data/prepare_kjv.py" --out "$DATA"

FLAGS=(-std=c11 -O1 -g -Wall -Wextra -Werror -pedantic)
SAN=(-fsanitize=address,undefined -fno-omit-frame-pointer)
# probe: some toolchains lack the sanitizer runtimes
if echo 'int main(void){return 0;}' | "$CC" -x c "${SAN[@]}" -o "$TMP/probe" - 2>/dev/null \
   && "$TMP/probe" 2>/dev/null; then
  FLAGS+=("${SAN[@]}")
else
  echo "test_tokenizer.sh: note: building without sanitizers (not available for $CC)"
fi
nice "$CC" "${FLAGS[@]}" -o "$BUILD/tokenizer_check" "$ROOT/tests/data/tokenizer_check.c"

# the header must stay valid C++ for nvcc; checking with the host C++ compiler is enough
if command -v c++ >/dev/null 2>&1; then
  echo '#include "llmc/host/tokenizer.h"' | nice c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only \
    -I "$ROOT" -x c++ - || { echo "test_tokenizer.sh: llmc/host/tokenizer.h does not compile as C++"; echo "0 passed, 1 failed"; exit 1; }
fi

# and with nvcc itself where there is one (no GPU needed to compile)
if command -v nvcc >/dev/null 2>&1; then
  printf '#include "llmc/host/tokenizer.h"\n__global__ void k(void) {}\nint main(void) { Tokenizer t; tokenizer_free(&t); return 0; }\n' > "$TMP/t.cu"
  nice nvcc -I "$ROOT" -Xcompiler -Wall,-Wextra,-Werror -c "$TMP/t.cu" -o "$TMP/t.o" \
    || { echo "test_tokenizer.sh: llmc/host/tokenizer.h does not compile with nvcc"; echo "0 passed, 1 failed"; exit 1; }
fi

ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
  "$BUILD/tokenizer_check" "$DATA/kjv_tokenizer.bin" "$DATA/tokenizer_check.txt" "$TMP" \
  "$DATA/kjv_train_000.bin" "$DATA/kjv_val_000.bin"
