// Global -> shared staging of the bf16 GEMM operand tiles in their stored layout, shared by the GEMM v6
// (matmul_wmma_async.cu) and v7 (matmul_mma.cu), which stage identically (over their own block tile and
// thread count) and differ only in how they read the tiles back and in how many stages they keep. Each thread
// copies 8 bf16 (16 B) per slot with cp.async (kernels/cuda/mma_ptx.cuh: .cg, src-size zero fill); the slot
// that crosses the matrix's last column copies only its in-range bytes, rows past the matrix copy 0 bytes.
// Operands whose rows are not 16-byte aligned take guarded scalar loads and plain shared stores instead. The
// caller commits and waits for the cp.async groups and synchronises.
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

/// Elements of one operand's tile slot in shared memory for a square kBM x kBM block tile: [kBM][kBK + kPad]
/// (A stored [M, K] or B stored [N, K]), which also holds the other stored layout, [kBK][kBM + kPad].
template <int kBM, int kBK, int kPad>
constexpr int tile_slot_elems() {
  static_assert(kBK * (kBM + kPad) <= kBM * (kBK + kPad), "both stored layouts fit one tile slot");
  return kBM * (kBK + kPad);
}

/// One K step's tiles of op(A) (rows row0.., k k0..) and op(B) (k k0.., columns col0..) into `stage`: A at 0,
/// B at tile_slot_elems<kBM, kBK, kPad>(), each in its stored layout (the fragment loads do the transposes).
template <int kThreads, int kPad, int kBM, int kBN, int kBK, bool kTransA, bool kTransB>
__device__ __forceinline__ void stage_step(const Stored& a, const Stored& b, int64_t row0, int64_t col0,
                                           int64_t k0, uint16_t* stage) {
  static_assert(kBN == kBM, "one tile slot size for A and B");
  constexpr int kSlot = tile_slot_elems<kBM, kBK, kPad>();
  if (kTransA) {
    stage_stored<kThreads, kPad, kBK, kBM>(a, k0, row0, stage);  // A stored [K, M]
  } else {
    stage_stored<kThreads, kPad, kBM, kBK>(a, row0, k0, stage);  // A stored [M, K]
  }
  if (kTransB) {
    stage_stored<kThreads, kPad, kBN, kBK>(b, col0, k0, stage + kSlot);  // B stored [N, K]
  } else {
    stage_stored<kThreads, kPad, kBK, kBN>(b, k0, col0, stage + kSlot);  // B stored [K, N]
  }
}

}  // namespace brigade::kernels::cuda::gemm_detail
