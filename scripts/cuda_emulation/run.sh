#!/usr/bin/env bash
# scripts/cuda_emulation/run.sh CPU_BUILD_DIR [OUTDIR] — runs brigade's hand-written CUDA kernels (every GEMM
# version v1-v8, the reference paths of the mma.sync/ldmatrix helpers, causal attention v1, flash v2 and
# flash on tensor cores v3/v4 forward and backward, the row kernels v1 and v2) on the CPU and compares them with the CPU backend or a
# double-precision loop. For machines without a GPU: it checks the kernels' index math, bounds, tails,
# alignment fallbacks, layouts and reductions. It does NOT replace the CUDA tests on a GPU.
#
# How: transform.py turns a kernels/cuda/*.cu file into host C++ (launches -> ::emu::launch, dynamic
# shared memory -> a buffer, cp.async -> a synchronous copy). include/ holds host stand-ins for
# cuda_runtime.h, cuda_bf16.h and mma.h. Each CUDA thread of a block is a fiber (a ucontext with its own
# stack) on one host thread, run round-robin: a fiber runs until it waits at a barrier (__syncthreads,
# __syncwarp, a shuffle's per-warp exchange) or ends; a barrier that the other threads never reach stops
# the run with the waiting threads named. __shared__ becomes static, so blocks run one at a time. WMMA
# fragments are held whole by every lane; the PTX helpers (kernels/cuda/mma_ptx.cuh, wgmma_ptx.cuh) take
# their plain-C++ reference paths. Between two barriers the threads run in a fixed order (0, 1, ...), so a
# missing barrier between a write and another thread's read shows whenever the reader runs first (a planted
# one in block_reduce fails rows_v1 on every run).
# What it cannot see: performance, warp-synchronous assumptions the real hardware would break, cp.async
# ordering, and races that need another interleaving than that order.
#
# CPU_BUILD_DIR: a -DBRIGADE_CUDA=OFF build with brigade_kernels built (its libraries give the references).
# On a shared machine run it as `nice -n 19 scripts/cuda_emulation/run.sh ...`.
# The harnesses' own run is seconds to tens of seconds of CPU each (GEMM v7's shuffle-based reference paths,
# one warp barrier per shuffle, the longest); compiling the transformed kernels is most of the time.
# EMU_GEMM_ONLY=<matmul_kernel_name> (e.g. v7-mma-sync) makes gemm_all run one version.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: run.sh CPU_BUILD_DIR [OUTDIR]}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
libs=("$build/kernels/libbrigade_kernels.a" "$build/tensor/libbrigade_tensor.a")
# The libraries the kernels library links (OpenBLAS where the build found it: kernels/CMakeLists.txt).
while read -r lib; do [ -n "$lib" ] && libs+=("$lib"); done < <(cat "$build/kernels/external_libraries.txt" 2>/dev/null)
# BRIGADE_CUDA_EMULATION: the PTX helper headers (kernels/cuda/*_ptx.cuh) take their host paths.
cxx=("${CXX:-g++}" -std=c++20 -O1 -w -DBRIGADE_CUDA_EMULATION -I"$here/include" -I"$repo" -fopenmp -pthread)

failed=0
# EMU_ONLY="rows flash" runs only the named harnesses (gemm_all mma_ptx rows flash flash_tc attention_v1
# rows_v1 memory): quicker while working on one kernel. Unset: every harness.
wanted() { [ -z "${EMU_ONLY:-}" ] || [[ " $EMU_ONLY " == *" $1 "* ]]; }
emulate() {  # NAME KERNEL_FILE HARNESS [extra compiler flags]
  local name=$1 src=$2 harness=$3
  shift 3
  wanted "$name" || return 0
  python3 "$here/transform.py" "$repo/kernels/cuda/$src.cu" "$out/$src.cpp"
  "${cxx[@]}" -DGEN_FILE="\"$out/$src.cpp\"" "$@" "$here/$harness" -o "$out/$name" "${libs[@]}"
  "$out/$name" || failed=$((failed + 1))
}
# Every GEMM version through the dispatcher: the kernel files as separate translation units.
if wanted gemm_all; then
  gemm_objects=()
  for src in matmul matmul_sgemm matmul_wmma matmul_wmma_async matmul_mma matmul_wgmma; do
    python3 "$here/transform.py" "$repo/kernels/cuda/$src.cu" "$out/$src.cpp"
    "${cxx[@]}" -x c++ -c "$out/$src.cpp" -o "$out/$src.o"
    gemm_objects+=("$out/$src.o")
  done
  "${cxx[@]}" "$here/gemm_all_emu.cpp" "${gemm_objects[@]}" -o "$out/gemm_all" "${libs[@]}"
  "$out/gemm_all" || failed=$((failed + 1))
fi
emulate mma_ptx mma_ptx_probe mma_ptx_emu.cpp  # the reference paths of kernels/cuda/mma_ptx.cuh
python3 "$here/transform.py" "$repo/kernels/cuda/layernorm_warp.cu" "$out/layernorm_warp.cpp"
emulate rows softmax_warp rows_emu.cpp -DGEN_FILE2="\"$out/layernorm_warp.cpp\""  # softmax, layernorm v2
emulate flash attention_flash flash_emu.cpp
emulate flash_tc attention_flash_tc flash_tc_emu.cpp  # attention v3/v4 (WMMA; v4 + cp.async), bf16
emulate attention_v1 attention attention_v1_emu.cpp
python3 "$here/transform.py" "$repo/kernels/cuda/layernorm.cu" "$out/layernorm.cpp"
emulate rows_v1 softmax rows_v1_emu.cpp -DGEN_FILE2="\"$out/layernorm.cpp\""  # softmax, layernorm v1
# The memory-bound kernels (elementwise v1/v2, AdamW, cross-entropy, embedding backward, column sums) through the CUDA
# sides of their *_with functions (kernels/<op>_versions.h): each kernel file its own unit,
# memory_emu_support.h force-included (host atomics; CPU tensors stand in for device ones).
if wanted memory; then
  memory_objects=()
  for src in elementwise elementwise_vec optim loss embedding reduce; do
    python3 "$here/transform.py" "$repo/kernels/cuda/$src.cu" "$out/memory_$src.cpp"
    "${cxx[@]}" -include "$here/memory_emu_support.h" -x c++ -c "$out/memory_$src.cpp" -o "$out/memory_$src.o"
    memory_objects+=("$out/memory_$src.o")
  done
  "${cxx[@]}" "$here/memory_emu.cpp" "${memory_objects[@]}" -o "$out/memory" "${libs[@]}"
  "$out/memory" || failed=$((failed + 1))
fi
echo "cuda emulation: $failed harness(es) failed"
exit $((failed != 0))
