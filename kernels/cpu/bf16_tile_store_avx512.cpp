// A bfloat16 C's tile stored from the GEMM's float sums on 16 AVX-512 lanes (kernels/cpu/gemm_loops.h:
// store_bf16_tile), the casts in registers (tensor/bf16_lanes_avx512.h). The array casts it replaces ran
// one to four calls a tile row (rounded sums, widened back, the bias added, rounded again), each through a
// dispatch and over 32 floats: 11 % of the baby GPT's bf16 training step on a Zen 4 core, where a tile row
// is 2 vectors and ~20 instructions of work. The bits are the array casts' (and so bfloat16(float)'s).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // g++ 12's AVX-512 headers (exp_rows_avx512.cpp)

#include "kernels/cpu/avx512_rows.h"
#include "kernels/cpu/gemm_loops.h"
#include "tensor/bf16_lanes_avx512.h"

namespace brigade::kernels::cpu::detail {

#if BRIGADE_CPU_X86
namespace {

/// One row's 16 lanes: float(c) + sum where not `first`, rounded to bfloat16; with a bias, that widened,
/// plus the bias, rounded again (a separate add's bits). Returns the bfloat16 in each lane's low half.
BRIGADE_AVX512_INLINE __m512i tile_lanes(__m512 sum, const bfloat16* c, bool first, bool has_bias,
                                         __m512 bias) {
  if (!first) sum = _mm512_add_ps(bf16_lanes::load(c), sum);
  __m512i bits = bf16_lanes::round_bits(_mm512_castps_si512(sum));
  if (has_bias)
    bits = bf16_lanes::round_bits(_mm512_castps_si512(_mm512_add_ps(bf16_lanes::float_of_bits(bits), bias)));
  return bits;
}

}  // namespace

BRIGADE_AVX512 void store_bf16_tile_avx512(const float* tile, int64_t nr, int64_t rows, int64_t cols,
                                           bfloat16* dst, int64_t ldc, bool first, const bfloat16* bias) {
  const bool has_bias = bias != nullptr;
  for (int64_t j = 0; j < cols; j += 16) {
    const int64_t width = std::min<int64_t>(16, cols - j);
    if (width == 16) {
      const __m512 b = has_bias ? bf16_lanes::load(bias + j) : _mm512_setzero_ps();
      for (int64_t i = 0; i < rows; ++i) {
        bfloat16* c = dst + i * ldc + j;
        bf16_lanes::store_bits(c, tile_lanes(_mm512_loadu_ps(tile + i * nr + j), c, first, has_bias, b));
      }
      continue;
    }
    // The last columns of an edge tile: through 16-element buffers (no masked 16-bit moves in AVX-512F).
    const __mmask16 m = first_lanes(width);
    bfloat16 lanes[16] = {}, bias_lanes[16] = {};
    if (has_bias) std::copy(bias + j, bias + j + width, bias_lanes);
    const __m512 b = bf16_lanes::load(bias_lanes);
    for (int64_t i = 0; i < rows; ++i) {
      bfloat16* c = dst + i * ldc + j;
      if (!first) std::copy(c, c + width, lanes);
      bf16_lanes::store_bits(
          lanes, tile_lanes(_mm512_maskz_loadu_ps(m, tile + i * nr + j), lanes, first, has_bias, b));
      std::copy(lanes, lanes + width, c);
    }
  }
}
#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
