// bfloat16 <-> float on 16 AVX-512 lanes, inline, for loops that fold the casts into their own arithmetic
// instead of running them as passes of their own: tensor/bf16_arrays.cpp's arrays and the bfloat16 bias +
// GELU rows of kernels/cpu/gelu_avx512.cpp. The bits are those of bfloat16.h's scalar casts: round to
// nearest even, a NaN stays a quiet NaN with its sign and top payload bits, denormals kept. Include only
// from code that runs where the CPU has AVX-512F (x86-64, GCC or Clang).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "tensor/bfloat16.h"

#define BRIGADE_BF16_LANES_INLINE __attribute__((target("avx512f"), always_inline)) inline

namespace brigade::bf16_lanes {

/// bfloat16.h's round_from_float on 16 lanes of float bits u: each lane's bfloat16 in its low 16 bits,
/// zeros above. u + 0x7fff + ((u >> 16) & 1), then >> 16, rounds to nearest even (the carry into the
/// exponent is the rounding up to the next binade, or to Inf); NaN lanes take (u >> 16) | 0x40 instead.
BRIGADE_BF16_LANES_INLINE __m512i round_bits(__m512i u) {
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, is_nan, quiet);
}

/// The floats that round_bits' lanes stand for (exact: a bfloat16 is a float's top half).
BRIGADE_BF16_LANES_INLINE __m512 float_of_bits(__m512i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

/// float(bfloat16(x)) lane by lane: x rounded to bfloat16's precision, kept in float.
BRIGADE_BF16_LANES_INLINE __m512 round_to_bf16(__m512 x) {
  return float_of_bits(round_bits(_mm512_castps_si512(x)));
}

/// 16 bfloat16 from memory, widened to float.
BRIGADE_BF16_LANES_INLINE __m512 load(const bfloat16* p) {
  return float_of_bits(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}

/// Stores round_bits' 16 lanes as 16 bfloat16 (vpmovdw keeps each lane's low 16 bits).
BRIGADE_BF16_LANES_INLINE void store_bits(bfloat16* p, __m512i bits) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
}

/// Stores 16 floats rounded to bfloat16.
BRIGADE_BF16_LANES_INLINE void store(bfloat16* p, __m512 x) {
  store_bits(p, round_bits(_mm512_castps_si512(x)));
}

}  // namespace brigade::bf16_lanes

#endif
