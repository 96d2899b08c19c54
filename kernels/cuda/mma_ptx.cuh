// Warp-level tensor-core and async-copy primitives as small device helpers, each a few lines of inline PTX
// (sm_80+), and each with a *reference path* in plain CUDA (__shfl_sync and ordinary loads) that computes
// exactly what the instruction is documented to compute. Used by the bf16 GEMM v7 (matmul_mma.cu); other
// kernels may include it.
//
// Which path the plain name (ldmatrix_x4, mma_bf16_16816, cp_async_16, ...) takes:
//   BRIGADE_CUDA_EMULATION defined (scripts/cuda_emulation, host code, no PTX): the reference path;
//   otherwise: the PTX. The *_ptx and *_reference variants stay callable by name on the device, so that
//   kernels/cuda/mma_ptx_probe.cu can run both on a GPU and tests/kernels/cuda_mma_ptx_test.cpp can check
//   that the reference paths (what the emulator runs) read the fragment layouts as the hardware does.
//
// Every warp-level helper must be called by all 32 lanes of the warp together (no divergence), as the
// instructions require; the reference paths shuffle with the full mask.
//
// Fragment notation (PTX ISA, "Matrix fragments for mma.m16n8k16", "ldmatrix"): lane = 0..31,
// g = lane / 4 (the "group", 0..7), t = lane % 4 (0..3). A .b32 register holds two bf16, the lower-numbered
// column (or k) in the low 16 bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace brigade::kernels::cuda::ptx {

constexpr unsigned kAllLanes = 0xffffffffu;

// ---- ldmatrix ------------------------------------------------------------------------------------------
//
// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8 x 8 matrices of 16-bit elements from shared memory.
// Lane 8 q + r (q, r = 0..7) gives the address of row r of matrix q: 8 consecutive b16 (16 bytes,
// 16-byte aligned). Result register q of lane (g, t) holds matrix q's
//     plain:  row g,        columns 2t and 2t + 1              (low, high half)
//     .trans: rows 2t, 2t + 1 of column g (i.e. row g of the transposed matrix)
//
//    matrix q as stored (8 rows of 8 b16)          plain: lane (g,t) <- M[g][2t], M[g][2t+1]
//       row r  <- address from lane 8q + r         .trans: lane (g,t) <- M[2t][g], M[2t+1][g]

/// Packs two bf16 bit patterns into one register (lo in the low half).
__device__ __forceinline__ uint32_t pack_b16(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

/// Reference ldmatrix .x4 (plain or .trans): each lane fetches the row addresses it needs from the lanes
/// that hold them, then reads its elements directly.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4_reference_impl(uint32_t (&r)[4], const void* row_address) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const auto mine = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(row_address));
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if (!kTrans) {
      const auto row =
          reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(__shfl_sync(kAllLanes, mine, 8 * q + g)));
      r[q] = pack_b16(row[2 * t], row[2 * t + 1]);
    } else {
      const auto row0 = reinterpret_cast<const uint16_t*>(
          static_cast<uintptr_t>(__shfl_sync(kAllLanes, mine, 8 * q + 2 * t)));
      const auto row1 = reinterpret_cast<const uint16_t*>(
          static_cast<uintptr_t>(__shfl_sync(kAllLanes, mine, 8 * q + 2 * t + 1)));
      r[q] = pack_b16(row0[g], row1[g]);
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4_reference(uint32_t (&r)[4], const void* row_address) {
  ldmatrix_x4_reference_impl<false>(r, row_address);
}
__device__ __forceinline__ void ldmatrix_x4_trans_reference(uint32_t (&r)[4], const void* row_address) {
  ldmatrix_x4_reference_impl<true>(r, row_address);
}

// ---- mma.sync m16n8k16 bf16 -> f32 ----------------------------------------------------------------------
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D (16 x 8) = A (16 x 16) B (16 x 8) + C, per warp.
//   A, 4 regs:  a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..2t+1]   a2 = A[g][2t+8..2t+9]   a3 = A[g+8][2t+8..2t+9]
//   B, 2 regs:  b0 = B[2t..2t+1][g]   b1 = B[2t+8..2t+9][g]   (k pairs of column g)
//   C, D:       c0, c1 = C[g][2t], C[g][2t+1]                 c2, c3 = C[g+8][2t], C[g+8][2t+1]
//
//          k 0 .. 7    k 8 .. 15                 n 0 .. 7
//   rows  +---------+---------+           k 0-7  +---------+           rows 0-7   +---------+
//   0-7   |   a0    |   a2    |                  |   b0    |                      |  c0 c1  |
//   8-15  |   a1    |   a3    |           k 8-15 |   b1    |           rows 8-15  |  c2 c3  |
//         +---------+---------+                  +---------+                      +---------+
// So A's four 8 x 8 quarters are ldmatrix_x4 matrices 0..3 in the order (rows 0-7, k 0-7), (rows 8-15,
// k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15); B's two halves are two .trans matrices of a [k][n] tile
// (or two plain matrices of an [n][k] tile).

__device__ __forceinline__ float bf16_low(uint32_t x) {
  const uint32_t bits = x << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
__device__ __forceinline__ float bf16_high(uint32_t x) {
  const uint32_t bits = x & 0xffff0000u;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/// Reference mma: lane (g, t) gathers rows g and g + 8 of A (from lanes 4g .. 4g + 3) and columns 2t and
/// 2t + 1 of B (from lanes 4(2t) + t' and 4(2t + 1) + t'), two registers per 64-bit shuffle, and sums in
/// float in k order. (The hardware's summation order is unspecified, so it may differ in the last bits.)
__device__ __forceinline__ void mma_bf16_16816_reference(float (&d)[4], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2], const float (&c)[4]) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  // Shuffled as pairs: (a0, a1), (a2, a3), (b0, b1).
  const unsigned long long a01 = a[0] | (static_cast<unsigned long long>(a[1]) << 32);
  const unsigned long long a23 = a[2] | (static_cast<unsigned long long>(a[3]) << 32);
  const unsigned long long b01 = b[0] | (static_cast<unsigned long long>(b[1]) << 32);
  float sum[4] = {c[0], c[1], c[2], c[3]};
#pragma unroll
  for (int tk = 0; tk < 4; ++tk) {  // the lane (g, tk) of row g holds k = 2tk, 2tk+1, 2tk+8, 2tk+9
    const unsigned long long ra01 = __shfl_sync(kAllLanes, a01, 4 * g + tk);
    const unsigned long long ra23 = __shfl_sync(kAllLanes, a23, 4 * g + tk);
    const unsigned long long rb0 = __shfl_sync(kAllLanes, b01, 4 * (2 * t) + tk);      // column 2t
    const unsigned long long rb1 = __shfl_sync(kAllLanes, b01, 4 * (2 * t + 1) + tk);  // column 2t + 1
    const uint32_t row_g[2] = {static_cast<uint32_t>(ra01), static_cast<uint32_t>(ra23)};
    const uint32_t row_g8[2] = {static_cast<uint32_t>(ra01 >> 32), static_cast<uint32_t>(ra23 >> 32)};
    const uint32_t col0[2] = {static_cast<uint32_t>(rb0), static_cast<uint32_t>(rb0 >> 32)};
    const uint32_t col1[2] = {static_cast<uint32_t>(rb1), static_cast<uint32_t>(rb1 >> 32)};
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // h = 0: k = 2tk, 2tk + 1; h = 1: k = 2tk + 8, 2tk + 9
      sum[0] += bf16_low(row_g[h]) * bf16_low(col0[h]) + bf16_high(row_g[h]) * bf16_high(col0[h]);
      sum[1] += bf16_low(row_g[h]) * bf16_low(col1[h]) + bf16_high(row_g[h]) * bf16_high(col1[h]);
      sum[2] += bf16_low(row_g8[h]) * bf16_low(col0[h]) + bf16_high(row_g8[h]) * bf16_high(col0[h]);
      sum[3] += bf16_low(row_g8[h]) * bf16_low(col1[h]) + bf16_high(row_g8[h]) * bf16_high(col1[h]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] = sum[i];
}

// ---- cp.async -----------------------------------------------------------------------------------------
//
// cp.async.cg.shared.global: a 16-byte global -> shared copy that does not pass through registers (and
// bypasses L1), of which the first src_bytes (0..16) are read and the rest zero-filled. Copies are grouped
// by commit_group; wait_group N blocks until at most N of this thread's groups are still in flight. A
// __syncthreads after the wait makes every thread's copies visible to the block.
// Reference: a synchronous copy with the same zero fill (commit and wait are no-ops), which checks what
// lands where but not the ordering of the pipeline.

__device__ __forceinline__ void cp_async_16_reference(void* dst, const void* src, int src_bytes) {
  memcpy(dst, src, static_cast<size_t>(src_bytes));
  memset(static_cast<char*>(dst) + src_bytes, 0, static_cast<size_t>(16 - src_bytes));
}

#if !defined(BRIGADE_CUDA_EMULATION)

// ldmatrix reads shared memory that plain stores or cp.async wrote before a barrier: the "memory" clobber
// keeps the compiler from moving it across that barrier or caching shared values around it.
__device__ __forceinline__ void ldmatrix_x4_ptx(uint32_t (&r)[4], const void* row_address) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans_ptx(uint32_t (&r)[4], const void* row_address) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void mma_bf16_16816_ptx(float (&d)[4], const uint32_t (&a)[4],
                                                   const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
__device__ __forceinline__ void cp_async_16_ptx(void* dst, const void* src, int src_bytes) {
  const unsigned dst_shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_shared), "l"(src), "r"(src_bytes)
               : "memory");
}

#endif  // !BRIGADE_CUDA_EMULATION

// ---- the names kernels call ----------------------------------------------------------------------------

/// Four 8 x 8 b16 matrices from shared memory (see "ldmatrix" above); row_address is this lane's row.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
#if defined(BRIGADE_CUDA_EMULATION)
  ldmatrix_x4_reference(r, row_address);
#else
  ldmatrix_x4_ptx(r, row_address);
#endif
}
/// As ldmatrix_x4, each matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
#if defined(BRIGADE_CUDA_EMULATION)
  ldmatrix_x4_trans_reference(r, row_address);
#else
  ldmatrix_x4_trans_ptx(r, row_address);
#endif
}
/// d = a b + c for one m16n8k16 tile (bf16 in, f32 accumulate); d may alias c.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                               const float (&c)[4]) {
#if defined(BRIGADE_CUDA_EMULATION)
  mma_bf16_16816_reference(d, a, b, c);
#else
  mma_bf16_16816_ptx(d, a, b, c);
#endif
}
/// 16 bytes global -> shared (both 16-byte aligned), the first src_bytes read, the rest zero-filled.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
#if defined(BRIGADE_CUDA_EMULATION)
  cp_async_16_reference(dst, src, src_bytes);
#else
  cp_async_16_ptx(dst, src, src_bytes);
#endif
}
/// Closes the group of this thread's cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace brigade::kernels::cuda::ptx
