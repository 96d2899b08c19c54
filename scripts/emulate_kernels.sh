#!/usr/bin/env bash
# Runs every hand-written CUDA kernel on the CPU emulator (scripts/cuda_emulation/run.sh) against the CPU
# backend: what CI can check of the CUDA code on a machine without a GPU (index math, tails, layouts,
# reductions, the PTX helpers' register layouts; not speed, not cp.async ordering, not real-hardware races).
# Builds only the two CPU libraries the harnesses link (the `cpu` preset, build-cpu/), then the emulation.
# The emulated CUDA threads are fibers on one host thread (scripts/cuda_emulation/include/cuda_runtime.h):
# scripts/cuda_emulation/run.sh alone, compiling its harnesses included, took 160 s of wall time and 144 s
# of CPU on a 2-core machine at load 3 (most of it g++ compiling the transformed kernels); with one
# std::thread per CUDA thread, whose barriers went through the kernel's scheduler, it was about 6 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
source scripts/env.sh
cmake --preset cpu >/dev/null
cmake --build build-cpu -j "$BRIGADE_JOBS" --target brigade_kernels brigade_tensor
scripts/cuda_emulation/run.sh build-cpu build-cpu/cuda_emulation
