// Philox4x32-10 (tensor/philox.h) for 16 consecutive element indices at once, with AVX-512: each of the
// generator's four 32-bit words is one zmm of 16 elements' words. The words are philox::random_bits' for
// every lane, bit for bit. Used by the CPU's random fills (tensor/device_ops.cpp) and dropout
// (kernels/cpu/dropout_avx512.cpp); include it only from code that calls it where the CPU has AVX-512F
// (__builtin_cpu_supports("avx512f")).
//
// Why: a draw is ten rounds of two 32 x 32 -> 64-bit multiplies and their xors, about 80 scalar
// instructions. Here a round's multiply is vpmuludq on the even lanes and again on the odd lanes shifted
// down, the low and high halves put back together by two masked blends: ~18 instructions a round for 16
// elements.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace brigade::philox {

#define BRIGADE_PHILOX16_INLINE __attribute__((target("avx512f"), always_inline)) inline

/// lo and hi of the 64-bit products m * a for 16 lanes of 32 bits: vpmuludq multiplies the even lanes;
/// the odd lanes are shifted down for a second one.
BRIGADE_PHILOX16_INLINE void mulhilo16(__m512i m, __m512i a, __m512i* lo, __m512i* hi) {
  const __m512i even = _mm512_mul_epu32(a, m);                        // 64-bit products of lanes 0, 2, ...
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // of lanes 1, 3, ...
  constexpr __mmask16 kOddLanes = 0xAAAA;
  *lo = _mm512_mask_blend_epi32(kOddLanes, even, _mm512_slli_epi64(odd, 32));
  *hi = _mm512_mask_blend_epi32(kOddLanes, _mm512_srli_epi64(even, 32), odd);
}

/// Words x and y of random_bits(seed, offset, index0 + lane) for the 16 lanes.
struct Words16 {
  __m512i x, y;
};

BRIGADE_PHILOX16_INLINE Words16 random_words16(uint64_t seed, uint64_t offset, uint64_t index0) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // index0 + lane as 64 bits: the low words, and the high words with the carry where the low ones wrapped.
  const __m512i low =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(index0))), lane);
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(low, lane);
  const __m512i index_high = _mm512_set1_epi32(static_cast<int>(index0 >> 32));
  __m512i x = low, y = _mm512_mask_add_epi32(index_high, wrapped, index_high, _mm512_set1_epi32(1));
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
  return {x, y};
}

/// keeps()' rule for 16 lanes in integers: uniform = (bits >> 8) / 2^24 >= p is (bits >> 8) >= ceil(p 2^24)
/// (p 2^24 is exact in double). This is that threshold, computed once per draw.
inline int keep_threshold(double p) {
  return static_cast<int>(std::ceil(p * 16777216.0));
}

/// Lane j set iff element index0 + j is kept: keeps(seed, offset, index0 + j, p), with keep_threshold(p).
BRIGADE_PHILOX16_INLINE __mmask16 keeps16(uint64_t seed, uint64_t offset, uint64_t index0, int threshold) {
  const __m512i bits = random_words16(seed, offset, index0).x;
  return _mm512_cmpge_epu32_mask(_mm512_srli_epi32(bits, 8), _mm512_set1_epi32(threshold));
}

#undef BRIGADE_PHILOX16_INLINE

}  // namespace brigade::philox

#endif
