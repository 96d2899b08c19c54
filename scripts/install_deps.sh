#!/usr/bin/env bash
# Installs what brigade needs to build and test on Debian/Ubuntu, skipping what is already there.
# The CUDA toolkit is optional: with nvcc on PATH (or in /usr/local/cuda/bin) the CUDA backend is built too.
# OpenMPI (openmpi-bin: mpirun; libopenmpi-dev: the library) runs the pipeline across processes
# (docs/distributed.md) and its tests.
#
#   scripts/install_deps.sh           # what the build, `brigade` and its C++ tests need
#   scripts/install_deps.sh --tests   # also what the rest of the test suite needs: a headless browser for
#                                     # the schedule lab page's test and clang for the fuzzers
#                                     # (scripts/test.sh and scripts/fuzz.sh ask for this)
#   scripts/install_deps.sh --torch   # also PyTorch on OpenBLAS, for scripts/bench_cpu_vs_torch.sh and the
#                                     # torch crosscheck test (which skip without it)
set -euo pipefail

# libopenblas-openmp-dev: OpenBLAS (its OpenMP build, which shares brigade's OpenMP threads) as the CPU
# matmul baseline, MatmulBackend::Blas; CMake finds it (BRIGADE_OPENBLAS=AUTO).
packages=(cmake ninja-build g++ make libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
          python3 libopenblas-openmp-dev libopenblas-dev openmpi-bin libopenmpi-dev)
for flag in "$@"; do
  case "$flag" in
    # chromium, chromium-driver, python3-selenium: the schedule lab page's test runs it in a headless
    # browser. clang, libclang-rt-dev, libomp-dev: scripts/fuzz.sh (libFuzzer and the sanitizers' runtimes,
    # clang's OpenMP).
    --tests) packages+=(chromium chromium-driver python3-selenium clang libclang-rt-dev libomp-dev) ;;
    # libopenblas0-openmp: without it PyTorch's matmuls fall back to Debian's reference BLAS, many times
    # slower, and the CPU comparison against PyTorch would flatter brigade.
    --torch) packages+=(python3-torch libopenblas0-openmp) ;;
    *) echo "usage: scripts/install_deps.sh [--tests] [--torch]" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "brigade: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
