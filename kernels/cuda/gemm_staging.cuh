// Global -> shared staging of one bf16 GEMM operand tile in its stored layout, shared by the GEMM v6
// (matmul_wmma_async.cu) and v7 (matmul_mma.cu), which stage identically and differ only in how they read
// the tiles back. Each thread copies 8 bf16 (16 B) per slot with cp.async (kernels/cuda/mma_ptx.cuh: .cg,
// src-size zero fill); the slot that crosses the matrix's last column copies only its in-range bytes, rows
// past the matrix copy 0 bytes. Operands whose rows are not 16-byte aligned take guarded scalar loads and
// plain shared stores instead. The caller commits and waits for the cp.async groups and synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/mma_ptx.cuh"

namespace brigade::kernels::cuda::gemm_detail {

/// A row-major stored matrix (the operand as it lies in memory): rows x cols, leading dim ld.
struct Stored {
  const uint16_t* x;  // bfloat16 bits of this batch entry's matrix
  int64_t ld, rows, cols;
  bool vec;  // rows_aligned(16 bytes)
};

/// Stages stored rows [r0, r0 + R) x cols [c0, c0 + C) into s (pitch C + kPad), zeros outside the matrix.
/// Called by all kThreads threads of the block (threadIdx.x in 0 .. kThreads - 1).
template <int kThreads, int kPad, int R, int C>
__device__ __forceinline__ void stage_stored(const Stored& src, int64_t r0, int64_t c0, uint16_t* s) {
  constexpr int kSlots = R * C / 8;
  static_assert(kSlots % kThreads == 0, "whole 8-element slots per thread");
  static_assert(C % 8 == 0 && kPad % 8 == 0, "slots and padded rows stay 16-byte aligned");
#pragma unroll
  for (int t = 0; t < kSlots / kThreads; ++t) {
    const int f = threadIdx.x + t * kThreads;
    const int r = f / (C / 8), c = (f % (C / 8)) * 8;
    const int64_t gr = r0 + r, gc = c0 + c;
    uint16_t* dst = s + r * (C + kPad) + c;
    const bool row_in = gr < src.rows;
    if (src.vec) {
      const int64_t in_range = row_in ? src.cols - gc : 0;
      const int bytes = in_range <= 0 ? 0 : (in_range >= 8 ? 16 : static_cast<int>(in_range) * 2);
      // A zero-byte copy still names a valid, aligned global address: the matrix's first element.
      ptx::cp_async_16(dst, bytes > 0 ? src.x + gr * src.ld + gc : src.x, bytes);
    } else {
      const uint16_t* at = src.x + gr * src.ld + gc;
#pragma unroll
      for (int q = 0; q < 8; ++q) dst[q] = (row_in && gc + q < src.cols) ? at[q] : uint16_t{0};
    }
  }
}

}  // namespace brigade::kernels::cuda::gemm_detail
