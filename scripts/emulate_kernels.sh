#!/usr/bin/env bash
# Runs every hand-written CUDA kernel on the CPU emulator (scripts/cuda_emulation/run.sh) against the CPU
# backend: what CI can check of the CUDA code on a machine without a GPU (index math, tails, layouts,
# reductions, the PTX helpers' register layouts; not speed, not cp.async ordering, not real-hardware races).
# Builds only the two CPU libraries the harnesses link (the `cpu` preset, build-cpu/), then the emulation.
# About 6 minutes on 2 cores (the CI dry run of 4ad9618, libraries included; 9 under other builds): thread
# creation dominates (a std::thread per CUDA thread per block).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
source scripts/env.sh
cmake --preset cpu >/dev/null
cmake --build build-cpu -j "$BRIGADE_JOBS" --target brigade_kernels brigade_tensor
scripts/cuda_emulation/run.sh build-cpu build-cpu/cuda_emulation
