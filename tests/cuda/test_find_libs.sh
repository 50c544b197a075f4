#!/usr/bin/env bash
# tests/cuda/test_find_libs.sh - the NCCL/cuDNN/cuBLASLt/nvrtc discovery of dev/cuda/find_libs.sh
# on fake layouts in a temp dir: Python wheels (nvidia/nccl, nvidia/cudnn, nvidia/cu13) with only
# versioned libraries, the CUDA 13 wheels' shared nvidia/cu13/{include,lib} with the files
# nvidia-cublas 13.1 and nvidia-cuda-nvrtc 13.0 ship, a -I in NVCC_FLAGS (must win), nvcc's own
# prefix, a system prefix, nothing at all, the cuDNN frontend folder; and real links: stand-in
# libnccl.so.2, libcublasLt.so.13 and libcublas.so.13 built with gcc, programs linked with the
# printed flags that run without LD_LIBRARY_PATH (symlink + rpath work).
set -u
here=$(cd "$(dirname "$0")/../../dev/cuda" && pwd)  # find_libs.sh, the script under test
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if [ "$1" = ok ]; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi; }
# run find_libs with the given environment; prints its output into $tmp/out.mk
run() { env FIND_LIBS_SYSTEM_DIRS="$tmp/none" FIND_LIBS_FRONTEND="$tmp/none" NVCC_FLAGS= "$@" bash "$here/find_libs.sh" "$tmp/link" > "$tmp/out.mk"; }
var() { sed -n "s/^$1 := //p" "$tmp/out.mk"; }
has() { case "$(var "$1")" in *"$2"*) echo ok ;; *) echo no ;; esac; }

mk() { mkdir -p "$(dirname "$1")" && : > "$1"; }
# 1. wheels: nvidia-nccl-cu13 and nvidia-cudnn-cu13 layouts, versioned libraries only
site=$tmp/site
mk "$site/nvidia/nccl/include/nccl.h"; mk "$site/nvidia/nccl/lib/libnccl.so.2"
mk "$site/nvidia/cudnn/include/cudnn.h"; mk "$site/nvidia/cudnn/lib/libcudnn.so.9"
run FIND_LIBS_SITE_DIRS="$tmp/empty-site $site"
check "$([ "$(var NCCL_FOUND)" = 1 ] && echo ok)" "wheel: NCCL found"
check "$(has NCCL_CFLAGS "-I$site/nvidia/nccl/include")" "wheel: nccl.h include dir ($(var NCCL_CFLAGS))"
check "$(has NCCL_LIBS "-L$tmp/link -lnccl")" "wheel: -lnccl through the symlink dir"
check "$(has NCCL_LIBS "-rpath=$site/nvidia/nccl/lib")" "wheel: rpath to the wheel's lib dir"
check "$([ "$(readlink "$tmp/link/libnccl.so")" = "$site/nvidia/nccl/lib/libnccl.so.2" ] && echo ok)" "wheel: libnccl.so -> libnccl.so.2 symlink"
check "$([ "$(var CUDNN_FOUND)" = 1 ] && echo ok)" "wheel: cuDNN found"
check "$(has CUDNN_CFLAGS "-I$site/nvidia/cudnn/include")" "wheel: cudnn.h include dir"
check "$(has CUDNN_LIBS "-lcudnn -Xlinker -rpath=$site/nvidia/cudnn/lib")" "wheel: -lcudnn and rpath"
check "$([ -z "$(var CUDNN_FRONTEND_CFLAGS)" ] && echo ok)" "no frontend: empty CUDNN_FRONTEND_CFLAGS"

# 2. a -I in NVCC_FLAGS wins over the wheel (both forms: -I dir and -Idir)
mk "$tmp/user/include/nccl.h"; mk "$tmp/user/lib/libnccl.so"
run FIND_LIBS_SITE_DIRS="$site" NVCC_FLAGS="-O3 -I $tmp/user/include"
check "$(has NCCL_CFLAGS "-I$tmp/user/include")" "NVCC_FLAGS '-I dir' honoured ($(var NCCL_CFLAGS))"
check "$(has NCCL_LIBS "-L$tmp/user/lib -lnccl")" "NVCC_FLAGS -I: library next to the header, unversioned"
run FIND_LIBS_SITE_DIRS="$site" NVCC_FLAGS="-O3 -I$tmp/user/include -std=c++17"
check "$(has NCCL_CFLAGS "-I$tmp/user/include")" "NVCC_FLAGS '-Idir' honoured"

# 3. the cu13 wheel layout and a system prefix with lib64
mk "$tmp/site13/nvidia/cu13/include/nccl.h"; mk "$tmp/site13/nvidia/cu13/lib/libnccl.so.2"
run FIND_LIBS_SITE_DIRS="$tmp/site13"
check "$(has NCCL_CFLAGS "-I$tmp/site13/nvidia/cu13/include")" "cu13 wheel layout"
mk "$tmp/sys/include/nccl.h"; mk "$tmp/sys/lib64/libnccl.so"
run FIND_LIBS_SITE_DIRS="$site" FIND_LIBS_SYSTEM_DIRS="$tmp/sys"
check "$(has NCCL_LIBS "-L$tmp/sys/lib64 -lnccl")" "system prefix before wheels"

# 4. nothing anywhere: not found, no failure; a header without a library is not found
run FIND_LIBS_SITE_DIRS="$tmp/empty"; rc=$?
check "$([ $rc = 0 ] && [ "$(var NCCL_FOUND)" = 0 ] && [ "$(var CUDNN_FOUND)" = 0 ] && echo ok)" "nothing found: NCCL_FOUND=0 CUDNN_FOUND=0, exit 0"
check "$(has FIND_LIBS_NOTE "cuDNN: not found")" "nothing found: a note for cuDNN"
mk "$tmp/half/nvidia/nccl/include/nccl.h"
run FIND_LIBS_SITE_DIRS="$tmp/half"
check "$([ "$(var NCCL_FOUND)" = 0 ] && echo ok)" "header without library: not found"
check "$(has FIND_LIBS_NOTE "but no libnccl.so")" "header without library: the note says so"

# 5. the cuDNN frontend folder
mk "$tmp/fe/include/cudnn_frontend.h"
run FIND_LIBS_SITE_DIRS="$site" FIND_LIBS_FRONTEND="$tmp/fe/include"
check "$(has CUDNN_FRONTEND_CFLAGS "-I$tmp/fe/include")" "cuDNN frontend include dir"

# 6. the CUDA 13 wheels: nvidia-cublas and nvidia-cuda-nvrtc share nvidia/cu13 (the files they ship)
c13=$tmp/site13w/nvidia/cu13
for f in include/cublas.h include/cublasLt.h include/cublas_api.h include/cublas_v2.h include/nvrtc.h lib/libcublas.so.13 \
    lib/libcublasLt.so.13 lib/libnvblas.so.13 lib/libnvrtc-builtins.so.13.0 lib/libnvrtc.alt.so.13 lib/libnvrtc.so.13; do
    mk "$c13/$f"; done
rm -rf "$tmp/link"
run FIND_LIBS_SITE_DIRS="$tmp/site13w"
check "$([ "$(var CUBLAS_FOUND)" = 1 ] && has CUBLAS_CFLAGS "-I$c13/include" | grep -q ok && echo ok)" "cu13 wheels: cuBLASLt found ($(var CUBLAS_CFLAGS))"
check "$(has CUBLAS_LIBS "-L$tmp/link -lcublasLt -lcublas -Xlinker -rpath=$c13/lib")" "cu13 wheels: -lcublasLt -lcublas through the symlink dir, rpath to cu13/lib"
check "$([ "$(readlink "$tmp/link/libcublasLt.so")" = "$c13/lib/libcublasLt.so.13" ] && [ "$(readlink "$tmp/link/libcublas.so")" = "$c13/lib/libcublas.so.13" ] && echo ok)" "cu13 wheels: libcublasLt.so and libcublas.so -> the .so.13 files"
check "$([ "$(var NVRTC_FOUND)" = 1 ] && has NVRTC_LIBS "-lnvrtc -Xlinker -rpath=$c13/lib" | grep -q ok && [ "$(readlink "$tmp/link/libnvrtc.so")" = "$c13/lib/libnvrtc.so.13" ] && echo ok)" "cu13 wheels: nvrtc found, libnvrtc.so -> libnvrtc.so.13 (not the builtins)"
check "$(has FIND_LIBS_NOTE "cuBLASLt: $c13/lib/libcublasLt.so.13")" "cu13 wheels: the note names the cuBLASLt found"
# the CUDA 12 wheels' own folders (nvidia/cublas, nvidia/cuda_nvrtc)
mk "$tmp/site12/nvidia/cublas/include/cublasLt.h"; mk "$tmp/site12/nvidia/cublas/lib/libcublasLt.so.12"
mk "$tmp/site12/nvidia/cublas/lib/libcublas.so.12"; mk "$tmp/site12/nvidia/cuda_nvrtc/include/nvrtc.h"
mk "$tmp/site12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
run FIND_LIBS_SITE_DIRS="$tmp/site12"
check "$(has CUBLAS_LIBS "-rpath=$tmp/site12/nvidia/cublas/lib")" "CUDA 12 wheels: nvidia/cublas"
check "$(has NVRTC_LIBS "-rpath=$tmp/site12/nvidia/cuda_nvrtc/lib")" "CUDA 12 wheels: nvidia/cuda_nvrtc"
# cuBLASLt without cuBLAS beside it: not found (the build needs both from one place)
mk "$tmp/lt/nvidia/cu13/include/cublasLt.h"; mk "$tmp/lt/nvidia/cu13/lib/libcublasLt.so.13"
run FIND_LIBS_SITE_DIRS="$tmp/lt"
check "$([ "$(var CUBLAS_FOUND)" = 0 ] && has FIND_LIBS_NOTE "cuBLASLt: not found" | grep -q ok && echo ok)" "libcublasLt without libcublas: not found, with a note"
check "$([ "$(var NVRTC_FOUND)" = 0 ] && has FIND_LIBS_NOTE "nvrtc: not found" | grep -q ok && echo ok)" "no nvrtc: NVRTC_FOUND=0, with a note"
# nvcc's own prefix comes before the wheels (a toolkit from wheels: nvidia/cu13/bin/nvcc)
mk "$tmp/tk/include/cublasLt.h"; mk "$tmp/tk/lib64/libcublasLt.so"; mk "$tmp/tk/lib64/libcublas.so"
mkdir -p "$tmp/tk/bin"; printf '#!/bin/sh\n' > "$tmp/tk/bin/nvcc"; chmod +x "$tmp/tk/bin/nvcc"
run FIND_LIBS_SITE_DIRS="$tmp/site13w" FIND_LIBS_NVCC="$tmp/tk/bin/nvcc"
check "$(has CUBLAS_LIBS "-L$tmp/tk/lib64 -lcublasLt -lcublas -Xlinker -rpath=$tmp/tk/lib64")" "FIND_LIBS_NVCC: nvcc's prefix before the wheels, unversioned libraries linked in place"

# 7. a real link and run: stand-in libnccl.so.2 (soname libnccl.so.2), versioned file only
if command -v gcc >/dev/null; then
    rl=$tmp/real/nvidia/nccl
    mkdir -p "$rl/include" "$rl/lib"
    echo 'int ncclGetVersion(int* v);' > "$rl/include/nccl.h"
    echo 'int ncclGetVersion(int* v) { *v = 4242; return 0; }' > "$tmp/fake.c"
    gcc -shared -fPIC -Wl,-soname,libnccl.so.2 "$tmp/fake.c" -o "$rl/lib/libnccl.so.2"
    rm -rf "$tmp/link"
    run FIND_LIBS_SITE_DIRS="$tmp/real"
    printf '#include <stdio.h>\n#include <nccl.h>\nint main(void) { int v = 0; ncclGetVersion(&v); printf("%%d\\n", v); return 0; }\n' > "$tmp/main.c"
    # shellcheck disable=SC2046
    env -u LIBRARY_PATH gcc "$tmp/main.c" -o "$tmp/main" $(var NCCL_CFLAGS) $(var NCCL_LIBS) 2> "$tmp/link.log"
    out=$(env -u LD_LIBRARY_PATH "$tmp/main" 2>&1)
    check "$([ "$out" = 4242 ] && echo ok)" "linked with the printed flags, runs without LD_LIBRARY_PATH (got '$out')"
    # cuBLASLt and cuBLAS from a cu13 wheel: two versioned libraries, libcublas needing libcublasLt
    rc13=$tmp/real13/nvidia/cu13
    mkdir -p "$rc13/include" "$rc13/lib"
    echo 'int cublasLtGetVersion(void); int cublasGetCudartVersion(void);' > "$rc13/include/cublasLt.h"
    echo 'int cublasLtGetVersion(void) { return 130100; }' > "$tmp/lt.c"
    echo 'int cublasLtGetVersion(void); int cublasGetCudartVersion(void) { return cublasLtGetVersion() + 1; }' > "$tmp/bl.c"
    gcc -shared -fPIC -Wl,-soname,libcublasLt.so.13 "$tmp/lt.c" -o "$rc13/lib/libcublasLt.so.13"
    gcc -shared -fPIC -Wl,-soname,libcublas.so.13 "$tmp/bl.c" -o "$rc13/lib/libcublas.so.13" "$rc13/lib/libcublasLt.so.13"
    rm -rf "$tmp/link"
    run FIND_LIBS_SITE_DIRS="$tmp/real13"
    printf '#include <stdio.h>\n#include <cublasLt.h>\nint main(void) { printf("%%d\\n", cublasGetCudartVersion()); return 0; }\n' > "$tmp/main13.c"
    # shellcheck disable=SC2046
    env -u LIBRARY_PATH gcc "$tmp/main13.c" -o "$tmp/main13" $(var CUBLAS_CFLAGS) $(var CUBLAS_LIBS) 2> "$tmp/link13.log"
    out=$(env -u LD_LIBRARY_PATH "$tmp/main13" 2>&1)
    check "$([ "$out" = 130101 ] && echo ok)" "cu13 cuBLASLt + cuBLAS linked with the printed flags, run without LD_LIBRARY_PATH (got '$out')"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
