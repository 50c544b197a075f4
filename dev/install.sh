#!/usr/bin/env bash
# Installs everything the build, the tests and the quickstart need on a fresh Debian
# machine: compiler bits (clang + libFuzzer for make fuzz, clang-format for make lint), Open MPI, PyTorch (Debian's, for the reference), the KJV
# corpus, the BPE library used to train the tokenizer, and Slurm with MUNGE (tests/test_slurm.sh).
# Idempotent and quiet when everything is already there.
set -euo pipefail
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential libopenmpi-dev openmpi-bin python3-torch python3-numpy \
         python3-matplotlib python3-pip bible-kjv clang clang-format libclang-rt-14-dev libopenblas0-pthread; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Slurm and MUNGE for tests/test_slurm.sh, which starts its own one-node cluster (its own
# slurm.conf, munge key and ports in a temp dir) and stops it; the packages' system services
# are not used. Without recommends: they pull ~25 plugin and -dev packages (InfluxDB, HDF5,
# IPMI, ROCm SMI) the test has no use for; slurm-wlm-basic-plugins, a dependency, has munge
# authentication, cons_tres, gres/gpu and the PMIx plugin that `srun --mpi=pmix` needs.
need=()
for p in slurmctld slurmd slurm-client munge; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Hugging Face tokenizers trains the byte-level BPE; Debian does not package it.
if ! /usr/bin/python3 -c "import tokenizers" 2>/dev/null; then
  echo "install.sh: pip installing tokenizers for /usr/bin/python3"
  /usr/bin/python3 -m pip install -q --break-system-packages tokenizers
fi
# CUDA binary tools for the resource and SASS checks (make cuda-resources-check): cuobjdump and
# nvdisasm are not in every toolkit install; PyPI ships them (not fatal when PyPI cannot be
# reached). The cuDNN frontend headers are vendored in third_party/cudnn_frontend.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if ! /usr/bin/python3 -c "import glob, site, sys; sys.exit(not any(glob.glob(d + '/nvidia/*/bin/cuobjdump') for d in site.getsitepackages()))" 2>/dev/null \
     && ! command -v cuobjdump >/dev/null 2>&1; then
    echo "install.sh: pip installing nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"
    /usr/bin/python3 -m pip install -q --break-system-packages nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm || echo "install.sh: note: cuobjdump not installed (make cuda-resources-check needs it)"
  fi
fi
# transformers, safetensors and lm-evaluation-harness for the Hugging Face export tests and
# the cloze evaluation, in their own venv that sees Debian's torch 1.13 (--system-site-packages):
# PyPI has no CPU-only torch, and letting pip resolve torch pulls ~4 GB of CUDA wheels. So
# transformers 4.46.3 (the last line that still accepts torch 1.13), its tokenizers 0.20 and
# numpy pinned to Debian's stay inside the venv, and lm-eval 0.4.5 and the two packages that
# depend on torch (accelerate, peft) are installed without dependency resolution. hypothesis (the
# fuzz test of dev/import_hf.py) is pinned to Debian 12's, which the venv already sees.
HF_VENV="${LLMC_HF_VENV:-$HOME/.cache/llmc/hf-venv}"
if ! "$HF_VENV/bin/python" -c "import transformers, safetensors, lm_eval, lm_eval.models.huggingface, hypothesis" \
    2>/dev/null; then
  echo "install.sh: creating $HF_VENV (transformers 4.46.3, lm-eval 0.4.5; ~3 min)"
  /usr/bin/python3 -m venv --system-site-packages "$HF_VENV"
  cons="$HF_VENV/constraints.txt"
  printf 'numpy==%s\ndatasets<3.2\npyarrow<18\n' "$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')" > "$cons"
  "$HF_VENV/bin/python" -m pip install -q -c "$cons" transformers==4.46.3 hypothesis==6.67.1 safetensors datasets \
    evaluate jsonlines numexpr pybind11 pytablewriter rouge-score sacrebleu scikit-learn sqlitedict \
    tqdm-multiprocess word2number zstandard more_itertools dill jinja2 psutil
  "$HF_VENV/bin/python" -m pip install -q --no-deps lm-eval==0.4.5 accelerate==0.34.2 peft==0.13.2
  "$HF_VENV/bin/python" -c "import transformers, safetensors, lm_eval.models.huggingface"
fi
# tensorboard and wandb for dev/track.py (experiment tracking; also into a venv made earlier)
if ! "$HF_VENV/bin/python" -c "import tensorboard, wandb" 2>/dev/null; then
  "$HF_VENV/bin/python" -m pip install -q -c "$HF_VENV/constraints.txt" tensorboard==2.21.0 wandb==0.31.0
fi
# datasketch (MinHash LSH) for dev/data/dedup.py; it needs only numpy and scipy, which the venv sees
if ! "$HF_VENV/bin/python" -c "import datasketch" 2>/dev/null; then
  "$HF_VENV/bin/python" -m pip install -q -c "$HF_VENV/constraints.txt" datasketch==2.0.0
fi
# Debian's torch 1.13 does not import torch.distributed.fsdp on Python 3.11: its sharded_tensor
# metadata has a dataclass field `= field(default=TensorProperties())`, a mutable default that 3.11
# refuses (ValueError). transformers' generate() and pipeline() import fsdp (generate's synced_gpus
# check), so they crash. PyPI's torch 2.x has the fix (default_factory) but is ~4 GB, and another
# transformers would move the pins above; so the venv gets a small import hook (a .pth runs it at
# start-up) that loads that one module with the same fix applied to its source, and nothing else.
# Rewritten on every run, so an older venv gets it too.
HF_SITE=$("$HF_VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cat > "$HF_SITE/llmc_torch311.py" <<'EOF'
"""Written by llm.c's dev/install.sh: loads torch.distributed._shard.sharded_tensor.metadata of
Debian's torch 1.13 with field(default_factory=TensorProperties), PyTorch's own later fix, so that
torch.distributed.fsdp (and transformers' generate(), which imports it) works on Python 3.11."""
import importlib.abc
import importlib.machinery
import sys

MODULE = "torch.distributed._shard.sharded_tensor.metadata"


class _Loader(importlib.machinery.SourceFileLoader):
    def get_data(self, path):
        data = super().get_data(path)
        if path.endswith(".py"):
            data = data.replace(b"field(default=TensorProperties())", b"field(default_factory=TensorProperties)")
        return data

    def path_stats(self, path):  # never the cached bytecode of the unfixed source
        raise OSError(path)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _Loader(spec.loader.name, spec.loader.path)
        return spec


if sys.version_info >= (3, 11) and not any(type(f).__name__ == "_Finder" for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
EOF
echo "import llmc_torch311" > "$HF_SITE/llmc_torch311.pth"
"$HF_VENV/bin/python" -c "import torch.distributed.fsdp" \
  || { echo "install.sh: error: torch.distributed.fsdp does not import in $HF_VENV (see the comment above)"; exit 1; }
# PyTorch 2.11 with numpy 2, the GPU machine's, in its own venv (~4.7 GB: PyPI's wheel needs its
# CUDA libraries to import, even on the CPU): make gpu-rehearsal runs the device's Python helpers in it
if [ -f Makefile ] && ! "${LLMC_TORCH_DEVICE_VENV:-$HOME/.cache/llmc/torch-device-venv}/bin/python" -c "import torch" 2>/dev/null; then
  echo "install.sh: creating the torch 2.11 venv for make gpu-rehearsal (~2 min)"
  make --no-print-directory torch-device-venv >/dev/null
fi
echo "install.sh: ok"
