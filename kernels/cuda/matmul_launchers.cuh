// Internal to the CUDA GEMMs: what matmul.cu's dispatcher (gemm_native) needs from the kernel versions that
// live in their own files, and the host helpers they share. Not part of the public API.
//
//   v3 Vectorized, v4 Warptiled (float32)   kernels/cuda/matmul_sgemm.cu
//   v5 Wmma (bfloat16 tensor cores)         kernels/cuda/matmul_wmma.cu
//   v6 WmmaAsync (v5 + cp.async pipeline)   kernels/cuda/matmul_wmma_async.cu
//   v7 MmaSync (mma.sync + ldmatrix)        kernels/cuda/matmul_mma.cu
//   v8 Wgmma (Hopper wgmma, sm_90a)          kernels/cuda/matmul_wgmma.cu
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend.h"

namespace brigade::kernels::cuda::gemm_detail {

/// Grid limit for y and z (x may go to 2^31 - 1).
constexpr int64_t kMaxGridYZ = 65535;

/// Launches `launch(grid_z, batch_offset)` once per chunk of at most 65535 batch entries (grid z limit).
template <typename Launch>
void for_each_batch_chunk(int64_t batch, Launch launch) {
  for (int64_t offset = 0; offset < batch; offset += kMaxGridYZ) {
    const int64_t count = batch - offset < kMaxGridYZ ? batch - offset : kMaxGridYZ;
    launch(static_cast<unsigned>(count), offset);
  }
}

/// Whether every row start of every batch entry of an operand is `bytes`-aligned, so that the kernels may
/// load `bytes / element_size` consecutive elements at once from any row at a column that is a multiple of
/// that count: the base pointer is aligned and the leading dim and batch stride are multiples of the count.
inline bool rows_aligned(const void* ptr, int64_t ld, int64_t batch_stride, int element_size, int bytes) {
  const int64_t count = bytes / element_size;
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0 && ld % count == 0 &&
         batch_stride % count == 0;
}

/// v3: float4 loads, transposed A tile, float4 shared reads (args.dtype is float32, m, n, batch > 0).
void launch_sgemm_vectorized(const GemmArgs& args, cudaStream_t stream);
/// v4: v3 + warp tiles and double-buffered shared memory (args.dtype is float32, m, n, batch > 0).
void launch_sgemm_warptiled(const GemmArgs& args, cudaStream_t stream);
/// v5: bf16 tensor cores via WMMA, fp32 accumulation (args.dtype is bfloat16, m, n, batch > 0).
void launch_gemm_wmma_bf16(const GemmArgs& args, cudaStream_t stream);
/// v6: v5 with tiles in their stored layout and cp.async double buffering (args.dtype is bfloat16).
void launch_gemm_wmma_async_bf16(const GemmArgs& args, cudaStream_t stream);
/// v7: mma.sync m16n8k16 + ldmatrix, 3-stage cp.async pipeline (args.dtype is bfloat16, m, n, batch > 0).
void launch_gemm_mma_bf16(const GemmArgs& args, cudaStream_t stream);
/// v8: wgmma from swizzled shared memory (args.dtype is bfloat16). Runs v6 for what wgmma_handles() refuses.
void launch_gemm_wgmma_bf16(const GemmArgs& args, cudaStream_t stream);
/// Whether v8 can run on `device`: the build holds sm_90a code (BRIGADE_CUDA_SM90A, set by CMake when
/// CMAKE_CUDA_ARCHITECTURES lists 90a) and the device is compute capability 9.0. False when no device.
bool wgmma_available(int device);
/// Whether v8's own kernel takes these arguments (A untransposed, B transposed, 16-byte aligned rows);
/// launch_gemm_wgmma_bf16 runs v6 for the rest.
bool wgmma_handles(const GemmArgs& args);

}  // namespace brigade::kernels::cuda::gemm_detail
