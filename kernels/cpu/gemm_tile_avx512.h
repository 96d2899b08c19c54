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

/// Rows of 32 floats at c (leading dim ldc): c = acc (first) or c += acc.
__attribute__((target("avx512f"), always_inline)) inline void store_tile(const Avx512Tile& acc, float* c,
                                                                         int64_t ldc, bool first) {
#pragma GCC unroll 12
  for (int i = 0; i < kAvx512TileRows; ++i) {
    float* row = c + i * ldc;
    if (first) {
      _mm512_storeu_ps(row, acc[i][0]);
      _mm512_storeu_ps(row + 16, acc[i][1]);
    } else {
      _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]));
      _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]));
    }
  }
}

}  // namespace brigade::kernels::cpu::detail
