#!/usr/bin/env bash
# dev/cuda/find_libs.sh LINKDIR - finds the headers and libraries of NCCL, cuDNN, cuBLASLt
# (with cuBLAS) and nvrtc for the CUDA build and prints them as make variables (dev/cuda/cuda.mk
# includes the output):
#   NCCL_FOUND NCCL_CFLAGS NCCL_LIBS    CUDNN_FOUND CUDNN_CFLAGS CUDNN_LIBS
#   CUBLAS_FOUND CUBLAS_CFLAGS CUBLAS_LIBS (-lcublasLt -lcublas)    NVRTC_FOUND NVRTC_LIBS
#   CUDNN_FRONTEND_CFLAGS               FIND_LIBS_NOTE (one line for the build log)
# Search order for each header: the -I directories in $NVCC_FLAGS (so a user's -I wins), the
# toolkit of $FIND_LIBS_NVCC (nvcc's ../include, ../lib: also a toolkit from Python wheels),
# the system/toolkit directories, then Python wheels under every site-packages:
# nvidia-nccl-cu13 (nvidia/nccl), nvidia-cudnn-cu13 (nvidia/cudnn), and the CUDA 13 wheels
# (nvidia-cublas, nvidia-cuda-nvrtc, ...) that share nvidia/cu13/{include,lib}; the CUDA 12
# ones (nvidia/cublas, nvidia/cuda_nvrtc) too. Wheels ship only versioned libraries
# (libnccl.so.2, libcublasLt.so.13), which -lnccl cannot find, so the script links them as
# LINKDIR/libnccl.so -> .../libnccl.so.2 and adds an rpath to the wheel's directory so the
# binary runs without LD_LIBRARY_PATH. Missing cuDNN or nvrtc only gives a note (the build then
# has no cuDNN attention); missing NCCL gives NCCL_FOUND=0 and the build stops with an error;
# missing cuBLASLt gives CUBLAS_FOUND=0 and the build links -lcublasLt from nvcc's own
# directories as before.
# Overrides (the test tests/cuda/test_find_libs.sh uses them with fake wheel layouts):
#   FIND_LIBS_SYSTEM_DIRS  prefixes searched as PREFIX/include + PREFIX/lib{,64}
#   FIND_LIBS_SITE_DIRS    site-packages directories (default: asked from python3)
#   FIND_LIBS_NVCC         the nvcc of the build (its prefix is searched first after the -I)
#   FIND_LIBS_FRONTEND     the cuDNN frontend include dir (default: the vendored third_party/cudnn_frontend/include)
set -u
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
linkdir=${1:?usage: find_libs.sh LINKDIR}
here=$(cd "$(dirname "$0")" && pwd)
sysdirs=${FIND_LIBS_SYSTEM_DIRS-"${CUDA_HOME:-/usr/local/cuda} /usr/local/cuda /usr /usr/local"}
# the prefix of the build's nvcc first: its own cuBLASLt and nvrtc match it
nvcc=${FIND_LIBS_NVCC:-}
if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then sysdirs="$(cd "$(dirname "$nvcc")/.." && pwd) $sysdirs"; fi
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
    local ldirs=("$inc/../lib" "$inc/../lib64" "$inc/../targets/x86_64-linux/lib") f
    for d in $sysdirs; do ldirs+=("$d/lib64" "$d/lib" "$d/lib/x86_64-linux-gnu" "$d/lib/aarch64-linux-gnu"); done
    for d in "${ldirs[@]}"; do
        f=$(has_lib "$d" "$lib") && { libdir=$(cd "$d" && pwd); libfile=$f; return 0; }
    done
    return 1
}

# has_lib DIR LIB: DIR holds libLIB.so or a versioned libLIB.so.N (prints the file name)
has_lib() {
    local f
    for f in "$1/lib$2.so" "$1"/lib$2.so.[0-9]*; do [ -f "$f" ] && { basename "$f"; return 0; }; done
    return 1
}

# link flags for LIB... in libdir (all there: find_one checked the first, the caller the rest);
# a versioned-only library gets a symlink in LINKDIR
link_flags() {
    local lib f flags="" need_link=0
    for lib in "$@"; do
        f=$(has_lib "$libdir" "$lib") || return 1
        if [ "$f" = "lib$lib.so" ]; then
            flags="$flags -l$lib"
        else
            mkdir -p "$linkdir" && ln -sf "$libdir/$f" "$linkdir/lib$lib.so"
            flags="$flags -l$lib"
            need_link=1
        fi
    done
    if [ $need_link = 1 ]; then
        echo "-L$(cd "$linkdir" && pwd)$flags -Xlinker -rpath=$libdir"
    else
        echo "-L$libdir$flags -Xlinker -rpath=$libdir"
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
    note="$note; cuDNN: not found (attention uses the own kernels)"
fi
# cuBLASLt and cuBLAS (one directory: the same wheel or toolkit)
if find_one cublasLt.h cublasLt cu13 cublas && has_lib "$libdir" cublas > /dev/null; then
    echo "CUBLAS_FOUND := 1"
    echo "CUBLAS_CFLAGS := -I$inc"
    echo "CUBLAS_LIBS := $(link_flags cublasLt cublas)"
    note="$note; cuBLASLt: $libdir/$libfile"
else
    echo "CUBLAS_FOUND := 0"
    echo "CUBLAS_CFLAGS :="
    echo "CUBLAS_LIBS :="
    note="$note; cuBLASLt: not found with the headers (linking nvcc's own -lcublasLt)"
fi
if find_one nvrtc.h nvrtc cu13 cuda_nvrtc; then
    echo "NVRTC_FOUND := 1"
    echo "NVRTC_LIBS := $(link_flags nvrtc)"
    note="$note; nvrtc: $libdir/$libfile"
else
    echo "NVRTC_FOUND := 0"
    echo "NVRTC_LIBS :="
    note="$note; nvrtc: not found (no cuDNN attention: its runtime-compiled engines need it)"
fi
if [ -f "$frontend/cudnn_frontend.h" ]; then
    echo "CUDNN_FRONTEND_CFLAGS := -I$(cd "$frontend" && pwd)"
    note="$note; cuDNN frontend: $frontend"
else
    echo "CUDNN_FRONTEND_CFLAGS :="
    note="$note; cuDNN frontend: not found in $frontend (vendored in third_party/cudnn_frontend: is the checkout complete?)"
fi
echo "FIND_LIBS_NOTE := $note"
