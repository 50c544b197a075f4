#!/usr/bin/env bash
# dev/cuda/find_libs.sh LINKDIR - finds the NCCL and cuDNN headers and libraries for the CUDA
# build and prints them as make variables (dev/cuda/cuda.mk includes the output):
#   NCCL_FOUND NCCL_CFLAGS NCCL_LIBS    CUDNN_FOUND CUDNN_CFLAGS CUDNN_LIBS
#   CUDNN_FRONTEND_CFLAGS               FIND_LIBS_NOTE (one line for the build log)
# Search order for each header: the -I directories in $NVCC_FLAGS (so a user's -I wins), the
# system/toolkit directories, then Python wheels (nvidia-nccl-cu13, nvidia-cudnn-cu13) under
# every site-packages. Wheels ship only versioned libraries (libnccl.so.2), which -lnccl cannot
# find, so the script links them as LINKDIR/libnccl.so -> .../libnccl.so.2 and adds an rpath to
# the wheel's directory so the binary runs without LD_LIBRARY_PATH. Missing cuDNN only gives a
# note (nothing uses it yet); missing NCCL gives NCCL_FOUND=0 and the build stops with an error.
# Overrides (the test tests/cuda/test_find_libs.sh uses them with fake wheel layouts):
#   FIND_LIBS_SYSTEM_DIRS  prefixes searched as PREFIX/include + PREFIX/lib{,64}
#   FIND_LIBS_SITE_DIRS    site-packages directories (default: asked from python3)
#   FIND_LIBS_FRONTEND     the cuDNN frontend include dir (default: the vendored third_party/cudnn_frontend/include)
set -u
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
linkdir=${1:?usage: find_libs.sh LINKDIR}
here=$(cd "$(dirname "$0")" && pwd)
sysdirs=${FIND_LIBS_SYSTEM_DIRS-"${CUDA_HOME:-/usr/local/cuda} /usr/local/cuda /usr /usr/local"}
if [ -n "${FIND_LIBS_SITE_DIRS+set}" ]; then
    sitedirs=$FIND_LIBS_SITE_DIRS
else
    sitedirs=$( { for py in python3 /usr/bin/python3; do
                    command -v "$py" >/dev/null 2>&1 && "$py" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
                  done; ls -d /usr/local/lib/python3*/dist-packages /usr/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages 2>/dev/null; } | awk '!seen[$0]++' | tr '\n' ' ')
fi
frontend=${FIND_LIBS_FRONTEND-$here/../../third_party/cudnn_frontend/include}

# the -I directories of NVCC_FLAGS (-I dir and -Idir)
user_inc=()
set -- ${NVCC_FLAGS:-}
while [ $# -gt 0 ]; do
    case "$1" in
        -I) [ $# -gt 1 ] && user_inc+=("$2"); shift ;;
        -I*) user_inc+=("${1#-I}") ;;
    esac
    shift
done

# find HEADER LIB WHEEL...: sets inc (dir with HEADER), libdir, libfile (libLIB.so or .so.N)
find_one() {
    local header=$1 lib=$2; shift 2
    local cands=() d w s
    for d in "${user_inc[@]+"${user_inc[@]}"}"; do cands+=("$d"); done
    for d in $sysdirs; do cands+=("$d/include"); done
    for s in $sitedirs; do for w in "$@"; do cands+=("$s/nvidia/$w/include"); done; done
    inc=""; libdir=""; libfile=""
    for d in "${cands[@]}"; do [ -f "$d/$header" ] && { inc=$d; break; }; done
    [ -n "$inc" ] || return 1
    # the library next to the header first, then the system library directories
    local ldirs=("$inc/../lib" "$inc/../lib64") f
    for d in $sysdirs; do ldirs+=("$d/lib64" "$d/lib" "$d/lib/x86_64-linux-gnu" "$d/lib/aarch64-linux-gnu"); done
    for d in "${ldirs[@]}"; do
        for f in "$d/lib$lib.so" "$d"/lib$lib.so.[0-9]*; do
            [ -f "$f" ] && { libdir=$(cd "$d" && pwd); libfile=$(basename "$f"); return 0; }
        done
    done
    return 1
}

# link flags for libdir/libfile; a versioned-only library gets a symlink in LINKDIR
link_flags() {
    local lib=$1
    if [ "$libfile" = "lib$lib.so" ]; then
        echo "-L$libdir -l$lib -Xlinker -rpath=$libdir"
    else
        mkdir -p "$linkdir" && ln -sf "$libdir/$libfile" "$linkdir/lib$lib.so"
        echo "-L$(cd "$linkdir" && pwd) -l$lib -Xlinker -rpath=$libdir"
    fi
}

note=""
if find_one nccl.h nccl nccl cu13; then
    echo "NCCL_FOUND := 1"
    echo "NCCL_CFLAGS := -I$inc"
    echo "NCCL_LIBS := $(link_flags nccl)"
    note="NCCL: $inc, $libdir/$libfile"
else
    echo "NCCL_FOUND := 0"
    echo "NCCL_CFLAGS :="
    echo "NCCL_LIBS :="
    note="NCCL: not found${inc:+ (nccl.h in $inc but no libnccl.so*)}"
fi
if find_one cudnn.h cudnn cudnn cu13; then
    echo "CUDNN_FOUND := 1"
    echo "CUDNN_CFLAGS := -I$inc"
    echo "CUDNN_LIBS := $(link_flags cudnn)"
    note="$note; cuDNN: $inc, $libdir/$libfile"
else
    echo "CUDNN_FOUND := 0"
    echo "CUDNN_CFLAGS :="
    echo "CUDNN_LIBS :="
    note="$note; cuDNN: not found (not needed yet)"
fi
if [ -f "$frontend/cudnn_frontend.h" ]; then
    echo "CUDNN_FRONTEND_CFLAGS := -I$(cd "$frontend" && pwd)"
    note="$note; cuDNN frontend: $frontend"
else
    echo "CUDNN_FRONTEND_CFLAGS :="
    note="$note; cuDNN frontend: not found in $frontend (vendored in third_party/cudnn_frontend: is the checkout complete?)"
fi
echo "FIND_LIBS_NOTE := $note"
