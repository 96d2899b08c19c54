// The 12 x 32 register tile of the AVX-512 GEMMs (v3 kernels/cpu/matmul_avx512.cpp, v4
// matmul_avx512_bf16.cpp): 24 zmm accumulators, zeroed and stored the same way whatever instruction
// multiplies into them. Always inlined into the micro-kernels (x86-64 builds only).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace brigade::kernels::cpu::detail {

constexpr int kAvx512TileRows = 12;  // MR; NR = 32 = two zmm of floats per row
using Avx512Tile = __m512[kAvx512TileRows][2];

__attribute__((target("avx512f"), always_inline)) inline void zero_tile(Avx512Tile& acc) {
#pragma GCC unroll 12
  for (int i = 0; i < kAvx512TileRows; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
}

/// Pulls the tile's rows of C (2 lines of 64 bytes each) towards L1, for writing. The micro-kernels call it
/// kPrefetchCAhead k steps before their last one: C rows are ldc floats apart, so each is a cache miss,
/// and 12 x 2 misses waited on at the store cost about 7 % of v3's time at GPT-2's layer shapes (perf).
/// Issued at the start instead, the lines would be pushed out of L1 again by the B micro-panel (KC x 32
/// floats = 42 KiB at KC 336) streaming through it.
constexpr int64_t kPrefetchCAhead = 32;  // ~32 x 24 cycles: covers a miss to DRAM (~100 ns)

__attribute__((target("avx512f"), always_inline)) inline void prefetch_tile(const float* c, int64_t ldc) {
#pragma GCC unroll 12
  for (int i = 0; i < kAvx512TileRows; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + 16, 1, 3);
  }
}

/// Rows of 32 floats at c (leading dim ldc): c = acc (first) or c += acc, then c += bias[0..32) where bias
/// is not nullptr (a separate add after the sum is rounded, as binary(Add) would do it).
__attribute__((target("avx512f"), always_inline)) inline void store_tile(const Avx512Tile& acc, float* c,
                                                                         int64_t ldc, bool first,
                                                                         const float* bias) {
  const __m512 bias0 = bias != nullptr ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias != nullptr ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < kAvx512TileRows; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (!first) {
      v0 = _mm512_add_ps(_mm512_loadu_ps(row), v0);
      v1 = _mm512_add_ps(_mm512_loadu_ps(row + 16), v1);
    }
    if (bias != nullptr) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
    }
    _mm512_storeu_ps(row, v0);
    _mm512_storeu_ps(row + 16, v1);
  }
}

}  // namespace brigade::kernels::cpu::detail
