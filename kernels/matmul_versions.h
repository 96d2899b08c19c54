// The matmul (GEMM) kernel versions, on each backend (the shape of every kernels/<op>_versions.h is
// described in kernels/kernel_versions.h). docs/kernels.md tells the story of the CUDA versions with their
// napkin math; docs/ops.md lists every op's versions.
//
// Besides these, two baselines to compare against, not brigade's versions: MatmulBackend::Cublas (kernels.h)
// makes CUDA matmuls run cuBLAS (kernels/cuda/matmul_cublas.cu), MatmulBackend::Blas makes CPU matmuls run
// OpenBLAS (kernels/cpu/matmul_openblas.cpp).
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "kernels/kernel_versions.h"

namespace brigade::kernels {

enum class MatmulKernel {
  /// CPU v1 (kernels/cpu/matmul.cpp): packed, cache-blocked, OpenMP-parallel GEMM (the GotoBLAS/BLIS
  /// structure) with a register-blocked micro-kernel, SSE2 or AVX2 picked at run time (the same bits, no
  /// FMA); every dtype; the float64 default. v2 improves: fused multiply-adds, blocks from the caches.
  CpuBlocked,
  /// CPU v2 (kernels/cpu/matmul_avx2_fma.cpp): BLIS's five loops (kernels/cpu/gemm_loops.h), blocks from
  /// the reported cache sizes, a 6 x 16 AVX2/FMA micro-kernel; float32 and bfloat16 (widened to float);
  /// needs avx2 and fma. v3 improves: AVX-512's 32 registers, a 12 x 32 tile.
  CpuAvx2Fma,
  /// CPU v3 (kernels/cpu/matmul_avx512.cpp): v2's loops with a 12 x 32 AVX-512 micro-kernel; float32 and
  /// bfloat16 (widened); needs avx512f; the float32 default where it runs. v4 improves: bf16 pairs
  /// multiplied by vdpbf16ps instead of widened.
  CpuAvx512,
  /// CPU v4 (kernels/cpu/matmul_avx512_bf16.cpp): v3's loops and tile with bf16 pairs packed in 32 bits and
  /// vdpbf16ps (AVX512-BF16), float accumulation, rounded once; bfloat16; needs avx512_bf16; the bfloat16
  /// default where it runs.
  CpuAvx512Bf16,
  /// CUDA v1 (kernels/cuda/matmul.cu): one thread per output, the K loop straight from global memory; every
  /// dtype. For teaching. v2 improves: operands reused from shared memory and registers.
  CudaNaive,
  /// CUDA v2 (kernels/cuda/matmul.cu): shared-memory tiles, 8 x 8 register blocking, scalar loads; every
  /// dtype; the float32 and float64 default. v3 improves: 16-byte loads and shared reads.
  CudaTiled,
  /// CUDA v3 (kernels/cuda/matmul_sgemm.cu): float4 loads, op(A) tile transposed in shared memory, float4
  /// shared reads; float32. v4 improves: warp tiles and double-buffered shared memory.
  CudaVectorized,
  /// CUDA v4 (kernels/cuda/matmul_sgemm.cu): v3 + warp tiles, BK 16, double-buffered shared memory;
  /// float32. v5 improves: the tensor cores (bfloat16).
  CudaWarptiled,
  /// CUDA v5 (kernels/cuda/matmul_wmma.cu): tensor cores through WMMA, bf16 in, fp32 accumulate; bfloat16;
  /// its default. v6 improves: no transposing scatter, cp.async double buffering.
  CudaWmma,
  /// CUDA v6 (kernels/cuda/matmul_wmma_async.cu): v5 with tiles in their stored layout and cp.async double
  /// buffering; bfloat16. v7 improves: mma.sync from ldmatrix, a register epilogue, 3 stages.
  CudaWmmaAsync,
  /// CUDA v7 (kernels/cuda/matmul_mma.cu): mma.sync m16n8k16 fed by ldmatrix, 3-stage cp.async pipeline;
  /// bfloat16. v8 improves: Hopper's wgmma from swizzled shared memory.
  CudaMmaSync,
  /// CUDA v8 (kernels/cuda/matmul_wgmma.cu): Hopper wgmma from 128B-swizzled shared memory, 4-stage
  /// cp.async; bfloat16, sm_90a builds on compute capability 9.0 only; runs A untransposed with B
  /// transposed and aligned rows itself and hands the other layouts to v6.
  CudaWgmma,
};

/// "v1-blocked", "v2-avx2-fma", "v3-avx512", "v4-avx512-bf16" (CPU); "v1-naive", "v2-tiled", "v3-vectorized",
/// "v4-warptiled", "v5-wmma", "v6-wmma-async", "v7-mma-sync", "v8-wgmma" (CUDA).
const char* matmul_kernel_name(MatmulKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind matmul_kernel_backend(MatmulKernel kernel);

/// Every MatmulKernel, in enum order (CPU v1 .. v4, then CUDA v1 .. v8).
const std::vector<MatmulKernel>& all_matmul_kernels();

/// Whether `kernel` implements `dtype` (gemm_with throws DTypeError for the other pairs). For CPU v2-v4 also
/// whether this CPU has their instructions (cpu_features()); for CudaWgmma whether the current CUDA device
/// can run it (compute capability 9.0, a build with sm_90a code): false in a build without CUDA.
bool matmul_kernel_supports(MatmulKernel kernel, DType dtype);

/// What kernels::matmul runs on `backend` for `dtype` (when matmul_backend() is Native): on the CPU the
/// fastest version that runs here (float32: v3, else v2, else v1; bfloat16: v4, else v3, else v2, else
/// v1; float64: v1); on CUDA CudaMmaSync for bfloat16, CudaWarptiled for float32 and CudaTiled for float64
/// (the fastest measured on an H200 at GPT-2's layer shapes, docs/kernels.md).
MatmulKernel default_matmul_kernel(DeviceKind backend, DType dtype);

/// Runs `kernel` on `args` (kernels/backend.h; pointers to memory of the version's backend; a CUDA version
/// runs on the device of args.c, on its current stream). Throws DTypeError when
/// !matmul_kernel_supports(kernel, args.dtype), DeviceError for a CUDA version without a CUDA build.
void gemm_with(MatmulKernel kernel, const GemmArgs& args);

namespace cpu {
/// The CPU side of gemm_with (kernels/cpu/matmul_dispatch.cpp): `kernel` is a CPU version.
void gemm_with(MatmulKernel kernel, const GemmArgs& args);
}  // namespace cpu

}  // namespace brigade::kernels
