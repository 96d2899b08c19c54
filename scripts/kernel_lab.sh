#!/usr/bin/env bash
# scripts/kernel_lab.sh OP --version V [--shape BxTxC] [--dtype f32|bf16|f64] ... — `brigade kernel` for a
# machine without a GPU: the same flags and report (apps/kernel_lab.h), with a CUDA version's code run on the
# CPU emulator (scripts/cuda_emulation/) against kernels/reference. It checks correctness, not speed: every
# CUDA thread runs as a fiber on one host thread, so keep shapes small (4x64x768 runs in seconds). With a
# GPU, use `brigade kernel`.
#
#   scripts/kernel_lab.sh layernorm --version 2 --shape 4x64x768
#   scripts/kernel_lab.sh attention --version 2 --shape 1x64x128 --heads 2
#   scripts/kernel_lab.sh matmul --version 3 --shape 128x96x64
#
# The first run builds the lab into build-cpu/kernel_lab_emu/ (the CPU build's kernels and tensor libraries,
# every kernels/cuda/*.cu kernel file transformed to host C++, every version registry compiled with its CUDA
# side on): a few minutes on 2 cores. Later runs rebuild only what changed, so a kernel edited (a bug
# planted, say) is picked up by the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
here=$repo/scripts/cuda_emulation
source scripts/env.sh
build=build-cpu
out=$build/kernel_lab_emu
if [ ! -f "$build/kernels/libbrigade_kernels.a" ] || [ "${BRIGADE_LAB_REBUILD_LIBS:-1}" = 1 ]; then
  cmake --preset cpu >/dev/null
  cmake --build "$build" -j "$BRIGADE_JOBS" --target brigade_kernels brigade_tensor >/dev/null
fi
mkdir -p "$out"
cxx=("${CXX:-g++}" -std=c++20 -O1 -w -DBRIGADE_CUDA_EMULATION -I"$here/include" -I"$repo" -fopenmp -pthread)

# Every kernel file that implements a version (cuBLAS, the PTX probe and the RNG have none).
kernel_files=(elementwise elementwise_vec optim loss embedding softmax softmax_warp layernorm layernorm_warp
              attention attention_flash attention_flash_tc matmul matmul_sgemm matmul_wmma matmul_wmma_async
              matmul_mma matmul_wgmma)
registries=(kernel_versions adamw_versions attention_versions cross_entropy_versions elementwise_versions
            embedding_backward_versions layernorm_versions matmul_versions softmax_versions)
compile() {  # SOURCE OBJECT [flags]: compiles when the object is missing or older than its inputs
  local src=$1 obj=$2
  shift 2
  if [ ! -f "$obj" ] || [ -n "$(find "$src" "$here/memory_emu_support.h" "$here/include" -newer "$obj" 2>/dev/null | head -1)" ]; then
    "${cxx[@]}" "$@" -c "$src" -o "$obj"
  fi
}
objects=()
for f in "${kernel_files[@]}"; do
  if [ ! -f "$out/$f.cpp" ] || [ "$repo/kernels/cuda/$f.cu" -nt "$out/$f.cpp" ]; then
    python3 "$here/transform.py" "$repo/kernels/cuda/$f.cu" "$out/$f.cpp"
  fi
  compile "$out/$f.cpp" "$out/$f.o" -include "$here/memory_emu_support.h" -x c++ &
  objects+=("$out/$f.o")
  while [ "$(jobs -r | wc -l)" -ge "$BRIGADE_JOBS" ]; do sleep 0.2; done
done
for f in "${registries[@]}"; do
  compile "$repo/kernels/$f.cpp" "$out/$f.o" -DBRIGADE_WITH_CUDA=1 &
  objects+=("$out/$f.o")
  while [ "$(jobs -r | wc -l)" -ge "$BRIGADE_JOBS" ]; do sleep 0.2; done
done
compile "$repo/apps/kernel_lab.cpp" "$out/kernel_lab.o" &
compile "$here/kernel_lab_emu.cpp" "$out/kernel_lab_emu_main.o" &
wait
objects+=("$out/kernel_lab.o" "$out/kernel_lab_emu_main.o")
libs=("$build/kernels/libbrigade_kernels.a" "$build/tensor/libbrigade_tensor.a")
while read -r lib; do [ -n "$lib" ] && libs+=("$lib"); done < <(cat "$build/kernels/external_libraries.txt" 2>/dev/null)
"${cxx[@]}" "${objects[@]}" -o "$out/kernel_lab_emu" "${libs[@]}"
exec "$out/kernel_lab_emu" "$@"
