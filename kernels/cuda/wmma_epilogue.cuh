// The epilogue the WMMA GEMMs share (v5 kernels/cuda/matmul_wmma.cu, v6 matmul_wmma_async.cu): a warp's
// grid of 16 x 16 fp32 accumulator fragments written to a bf16 C, guarded at the matrix edges.
//
// WMMA's accumulator layout is opaque, so each fragment goes through a per-warp 16 x 16 float scratch in
// shared memory (store_matrix_sync), and the warp's lanes then write its in-range elements to C: lane e
// takes elements e, e + 32, ... of the row-major scratch, so a warp writes two 16-element row pieces per
// pass (32 B runs; coalescing is poor, but the epilogue is one pass over C against K / 32 staged steps).
// v7 (matmul_mma.cu) knows its fragment layout and writes from registers instead.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "tensor/bfloat16.h"

namespace brigade::kernels::cuda {

/// Writes acc[i][j] (rows row0 + 16 i .., columns col0 + 16 j ..) to c (row-major, leading dim ldc), the
/// elements with row < m and column < n only. scratch: this warp's 256 floats of shared memory (32-byte
/// aligned, as store_matrix_sync requires). Called by all 32 lanes of the warp.
template <int kFragsM, int kFragsN, typename Accumulator>
__device__ __forceinline__ void store_wmma_fragments_bf16(const Accumulator (&acc)[kFragsM][kFragsN],
                                                          float* scratch, bfloat16* c, int64_t ldc,
                                                          int64_t row0, int64_t col0, int64_t m, int64_t n,
                                                          int lane) {
  constexpr int kFrag = 16;
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) {
      nvcuda::wmma::store_matrix_sync(scratch, acc[i][j], kFrag, nvcuda::wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < kFrag * kFrag; e += 32) {
        const int64_t gi = row0 + i * kFrag + e / kFrag;
        const int64_t gj = col0 + j * kFrag + e % kFrag;
        if (gi < m && gj < n) c[gi * ldc + gj] = bfloat16(scratch[e]);
      }
      __syncwarp();  // the scratch is overwritten by the next fragment
    }
  }
}

}  // namespace brigade::kernels::cuda
