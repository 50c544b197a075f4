#!/usr/bin/env bash
# Puts the cuDNN frontend headers (header-only C++, PyPI wheel nvidia-cudnn-frontend) into
# dev/cuda/third_party/cudnn_frontend/include, an ignored folder that travels with the working
# tree, so a GPU machine without network still builds the cuDNN attention. Idempotent.
# dev/install.sh calls it; a missing network only means the build uses the own kernels.
set -euo pipefail
cd "$(dirname "$0")"
dst=third_party/cudnn_frontend
[ -f "$dst/include/cudnn_frontend.h" ] && exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3 || echo /usr/bin/python3)
if ! "$py" -m pip download -q --no-deps -d "$tmp" nvidia-cudnn-frontend 2>"$tmp/err"; then
    echo "get_cudnn_frontend.sh: could not download nvidia-cudnn-frontend ($(tail -n 1 "$tmp/err")): CUDA build will use the own attention kernels"
    exit 0
fi
mkdir -p "$dst"
"$py" - "$tmp" "$dst" <<'PY'
import sys, zipfile, glob, os
whl = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith("include/") and not n.endswith("/"):
            z.extract(n, sys.argv[2])
PY
echo "get_cudnn_frontend.sh: cuDNN frontend headers in dev/cuda/$dst/include"
