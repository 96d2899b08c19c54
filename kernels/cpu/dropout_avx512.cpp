// Dropout's Philox mask, 16 elements a step (dropout_avx512.h).
//
// Napkin math, per 16 elements: 10 rounds x (2 x [2 vpmuludq, 3 shifts, 2 blends] + 4 xors) ~ 180
// instructions, then the keep compare and a masked multiply; about 11 instructions an element against ~80
// for scalar Philox. 4 bytes read and 4 written an element: at ~2 vector instructions a cycle that is
// ~0.4 ns an element on one core, above the copy rate of a cache-resident tensor but not of memory.
// g++ 12 warns "__Y may be used uninitialized" inside its AVX-512 intrinsics (their _mm512_undefined_*
// pass-through operand, fully overwritten under an all-ones mask): a false positive of its headers, as in
// exp_rows_avx512.cpp. Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 512-bit vector types pass through this file's inline functions (g++ notes the ABI change otherwise).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/dropout_avx512.h"

#include "kernels/cpu/avx512_rows.h"  // BRIGADE_CPU_X86, BRIGADE_AVX512*

#if BRIGADE_CPU_X86
#include <cmath>

namespace brigade::kernels::cpu::detail {
namespace {

/// lo and hi of the 64-bit products m * a for 16 lanes of 32 bits: vpmuludq multiplies the even lanes;
/// the odd lanes are shifted down for a second one.
BRIGADE_AVX512_INLINE void mulhilo16(__m512i m, __m512i a, __m512i* lo, __m512i* hi) {
  const __m512i even = _mm512_mul_epu32(a, m);                        // 64-bit products of lanes 0, 2, ...
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // of lanes 1, 3, ...
  constexpr __mmask16 kOddLanes = 0xAAAA;
  *lo = _mm512_mask_blend_epi32(kOddLanes, even, _mm512_slli_epi64(odd, 32));
  *hi = _mm512_mask_blend_epi32(kOddLanes, _mm512_srli_epi64(even, 32), odd);
}

/// Word x of Philox4x32-10 (tensor/philox.h) for the counters (index, offset) of 16 consecutive indices.
BRIGADE_AVX512_INLINE __m512i philox_first_word(uint64_t index0, uint64_t offset, uint64_t seed) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // index0 + lane as 64 bits: the low words, and the high words with the carry where the low ones wrapped.
  const __m512i low =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(index0))), lane);
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(low, lane);
  const __m512i high =
      _mm512_mask_add_epi32(_mm512_set1_epi32(static_cast<int>(index0 >> 32)), wrapped,
                            _mm512_set1_epi32(static_cast<int>(index0 >> 32)), _mm512_set1_epi32(1));
  __m512i x = low, y = high;
  __m512i z = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(offset)));
  __m512i w = _mm512_set1_epi32(static_cast<int>(offset >> 32));
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53u), mul1 = _mm512_set1_epi64(0xCD9E8D57u);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(mul0, x, &lo0, &hi0);
    mulhilo16(mul1, z, &lo1, &hi1);
    const __m512i next_x =
        _mm512_xor_si512(_mm512_xor_si512(hi1, y), _mm512_set1_epi32(static_cast<int>(k0)));
    const __m512i next_z =
        _mm512_xor_si512(_mm512_xor_si512(hi0, w), _mm512_set1_epi32(static_cast<int>(k1)));
    x = next_x, y = lo1, z = next_z, w = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return x;
}

}  // namespace

BRIGADE_AVX512 void dropout_float_avx512(const float* x, float* out, int64_t n, int64_t first, double p,
                                         float scale, uint64_t seed, uint64_t offset) {
  // uniform = (bits >> 8) / 2^24 >= p, with p a double: the same as (bits >> 8) >= ceil(p * 2^24), in
  // integers (p * 2^24 is exact).
  const __m512i threshold = _mm512_set1_epi32(static_cast<int>(std::ceil(p * 16777216.0)));
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(std::min<int64_t>(16, n - i));
    const __m512i bits = philox_first_word(static_cast<uint64_t>(first + i), offset, seed);
    const __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(bits, 8), threshold);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_maskz_mul_ps(keep, v, s));
  }
}

}  // namespace brigade::kernels::cpu::detail

#endif
