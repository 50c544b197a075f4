#!/usr/bin/env bash
# Installs everything the build, the tests and the quickstart need on a fresh Debian
# machine: compiler bits, Open MPI, PyTorch (Debian's, for the reference), the KJV
# corpus, and the BPE library used to train the tokenizer. Idempotent and quiet when
# everything is already there.
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential libopenmpi-dev openmpi-bin python3-torch python3-numpy \
         python3-matplotlib python3-pip bible-kjv libopenblas0-pthread; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Hugging Face tokenizers trains the byte-level BPE; Debian does not package it.
if ! /usr/bin/python3 -c "import tokenizers" 2>/dev/null; then
  echo "install.sh: pip installing tokenizers for /usr/bin/python3"
  /usr/bin/python3 -m pip install -q --break-system-packages tokenizers
fi
echo "install.sh: ok"
