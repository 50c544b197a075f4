#!/usr/bin/env bash
# dev/cuda/prebuilt.sh - the GPU check's prebuilt binaries (make gpu-prebuilt, doc/gpu_check.md):
#   bash dev/cuda/prebuilt.sh hash              the sha256 of the sources the binaries are made of
#   bash dev/cuda/prebuilt.sh manifest DIR [NVCC]  DIR/MANIFEST: that hash, the toolkit, cuDNN,
#                                               NCCL, the newest glibc/libstdc++ symbols the binaries
#                                               need, their rpaths and sizes (no NVCC: emulated binaries,
#                                               the rehearsal's stand-in)
#   bash dev/cuda/prebuilt.sh check DIR         exit 0 when DIR/MANIFEST exists and its hash is this
#                                               tree's; else one line saying why, exit 1
# The hash covers the CUDA trainer, its tests and every header they include (llmc/, tests/*.h,
# tests/cuda/) and the build rules (dev/cuda/cuda.mk): a prebuilt binary of other sources is
# refused (dev/gpu_check.sh then rebuilds). Contents only, no git: the device has no .git.
set -u
cd "$(dirname "$0")/../.."

sources() {
    LC_ALL=C ls -1 train_gpt.cu test_gpt.cu dev/cuda/cuda.mk llmc/*/*.h llmc/*/*.cuh llmc/*/*.cpp tests/*.h \
        tests/cuda/*.cu tests/cuda/*.h 2> /dev/null | LC_ALL=C sort
}
src_hash() { sources | while read -r f; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -c1-64; }

case "${1:-}" in
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    hash) src_hash ;;
    manifest)
        dir=${2:?usage: prebuilt.sh manifest DIR [NVCC]}
        nvcc=${3:-}
        inc=$([ -n "$nvcc" ] && echo "$(dirname "$nvcc")/../include" || echo /nonexistent)
        cuobjdump=$(command -v cuobjdump || ls /usr/local/lib/python3*/dist-packages/nvidia/cu13/bin/cuobjdump 2> /dev/null \
            | head -n 1)
        ver() { sed -n "s/^#define $2 *\([0-9][0-9]*\).*/\1/p" "$1" 2> /dev/null | head -n 1; }
        {
            echo "sources $(src_hash)"
            if [ -z "$nvcc" ]; then
                echo "nvcc none (emulated binaries: the rehearsal's stand-in)"
            else
                echo "nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p')"
                archs=$([ -n "$cuobjdump" ] && "$cuobjdump" --list-elf "$dir/train_gpt_cu" 2> /dev/null | grep -o 'sm_[0-9]*' \
                    | sort -u | tr '\n' ' ')
                echo "archs ${archs:-sm_90 (asked; no cuobjdump to read it back)}"
            fi
            if [ -n "$nvcc" ]; then
                echo "cudnn $(ver "$inc/cudnn_version.h" CUDNN_MAJOR).$(ver "$inc/cudnn_version.h" CUDNN_MINOR).$(ver \
                    "$inc/cudnn_version.h" CUDNN_PATCHLEVEL)"
                echo "nccl $(ver "$inc/nccl.h" NCCL_MAJOR).$(ver "$inc/nccl.h" NCCL_MINOR).$(ver "$inc/nccl.h" NCCL_PATCH)"
            fi
            for b in "$dir"/*; do
                [ -f "$b" ] && [ -x "$b" ] || continue
                n=$(basename "$b")
                echo "binary $n $(stat -c %s "$b") bytes; needs $(readelf -d "$b" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' \
                    | tr '\n' ' ')"
                echo "runpath $n $(readelf -d "$b" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')"
                echo "symbols $n $(objdump -T "$b" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -n 1)" \
                    "$(objdump -T "$b" | grep -o 'GLIBCXX_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -n 1)"
            done
            echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(ldd --version 2> /dev/null | head -n 1)"
        } > "$dir/MANIFEST.tmp" && mv "$dir/MANIFEST.tmp" "$dir/MANIFEST"
        cat "$dir/MANIFEST"
        ;;
    check)
        dir=${2:?usage: prebuilt.sh check DIR}
        [ -f "$dir/MANIFEST" ] || { echo "no $dir/MANIFEST: make gpu-prebuilt writes it (not carried?)"; exit 1; }
        want=$(src_hash)
        have=$(sed -n 's/^sources //p' "$dir/MANIFEST")
        [ "$have" = "$want" ] || { echo "$dir was built from other sources (${have:0:12} vs this tree's ${want:0:12}):" \
            "make gpu-prebuilt again"; exit 1; }
        echo "$dir matches this tree's sources (${want:0:12})"
        ;;
    *) echo "usage: prebuilt.sh hash | manifest DIR [NVCC] | check DIR" >&2; exit 2 ;;
esac
