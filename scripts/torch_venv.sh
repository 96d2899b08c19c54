#!/usr/bin/env bash
# Makes (once) a Python virtual environment with the current PyTorch from PyPI, for the CPU comparison
# (scripts/bench_cpu_vs_torch.sh), and prints its python's path on stdout.
#
#   scripts/torch_venv.sh                 # creates or reuses ~/.cache/brigade/torch-venv
#   BRIGADE_TORCH_VENV=DIR scripts/torch_venv.sh
#
# PyPI's default torch wheel for Linux x86-64 is the CUDA build: pip also installs the CUDA runtime
# packages (nvidia-*, a few GiB). On a machine without a GPU they are only loaded, never used: the CPU
# kernels are the same as in the CPU-only wheel (MKL and oneDNN). The CPU-only index
# (download.pytorch.org) is not used because not every machine can reach it.
# Needs python3-venv (Debian) and network access to PyPI the first time.
set -euo pipefail

VENV="${BRIGADE_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/brigade/torch-venv}"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import torch, numpy' >/dev/null 2>&1; then
  echo "torch_venv: installing PyTorch from PyPI into $VENV (once; a few GiB)" >&2
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --upgrade pip >&2
  "$VENV/bin/pip" install --quiet torch numpy >&2
fi
echo "$VENV/bin/python"
