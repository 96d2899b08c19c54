// exp on 16 float lanes with AVX-512 and fused multiply-adds, for the fast row loops (softmax and
// cross-entropy v2, GELU v3, attention v3). Include only from code compiled for "avx512f,fma" (the
// BRIGADE_AVX512 attributes below) and called where the CPU has both (cpu_features()).
//
// Why not vector_math.h's exp_v: that one is written lane by lane without FMA so that every ISA gives the
// same bits, and it spends ~25 instructions on 16 lanes (a degree-5 polynomial after a range reduction by
// ln 2). Here the reduction is by ln 2 / 16 and a 16-entry table of 2^(j/16), looked up inside one register
// (vpermps), so a degree-3 polynomial is enough:
//   x = (16 m + j) ln2/16 + r,  |r| <= ln2/32 ~ 0.0217,  exp(x) = 2^m * 2^(j/16) * exp(r)
//   exp(r) ~ 1 + r + r^2/2 + r^3/6: the first term dropped, r^4/24 < 1e-8, is 0.08 ulp at 1.
// 2^m is applied by vscalefps, which also floors its exponent operand itself. k = round(x 16/ln2) comes
// from adding a shifter in the FMA that scales x, whose low mantissa bits are then the table's index. 11
// instructions per 16 lanes, all of them on the vector FP pipes (Zen 4 issues two 512-bit ones a cycle: ~6
// cycles at best), and a compare and a masked move for the low end below. Measured error
// (tests/kernels/exp_rows_test.cpp, against exp in double over [-87.3, 88]): max 1.06 ulp, from the table's
// rounding.
//
// Domain: below -87.3 the result is 0, as exp_v's (vector_math.h). The exact value is under FLT_MIN there,
// and a lane that computes a denormal, or an underflow to 0, costs an Intel core a microcode assist of
// ~150 cycles unless the thread flushes denormals: the masked scores (-inf) of causal attention are such
// lanes, half of a short row's, and took the attention at the baby GPT's size 2.4x as long. So those lanes
// are set to 0 by a mask, not computed. Above 88 it is +inf (exp overflows float at 88.72; the band in
// between is taken as overflow, as exp_v does); NaN gives NaN.
#pragma once

#include "kernels/cpu/avx512_rows.h"  // BRIGADE_CPU_X86, BRIGADE_AVX512_INLINE

#if BRIGADE_CPU_X86

namespace brigade::kernels::cpu::detail {

/// 2^(k/16) * e^r for an integer-valued k (|k| < 2^12) and |r| <= ln2/32 (or NaN): the table, polynomial and
/// scaling that every exp16 variant ends in. `index` holds k mod 16 in the low 4 bits of each lane (the
/// integer k itself, or the bits of k + 1.5 * 2^23 as a float: see exp16_in_range).
BRIGADE_AVX512_INLINE __m512 exp16_from(__m512 k, __m512i index, __m512 r) {
  // 2^(j/16) for j = 0..15, each rounded to float.
  const __m512 table = _mm512_setr_ps(1.0f, 1.04427373f, 1.09050775f, 1.13878858f, 1.18920708f, 1.24185777f,
                                      1.29683959f, 1.35425556f, 1.41421354f, 1.47682619f, 1.54221082f,
                                      1.61049032f, 1.68179286f, 1.75625217f, 1.83400810f, 1.91520655f);
  // exp(r) - 1 ~ r + r^2/2 + r^3/6 (Horner), then 2^(j/16) * (1 + that) as one FMA.
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_mul_ps(p, r);
  // j = k mod 16 is the low 4 bits of the index, which is all vpermps reads of it.
  const __m512 t = _mm512_permutexvar_ps(index, table);
  const __m512 mantissa = _mm512_fmadd_ps(t, p, t);
  // vscalefps multiplies by 2^floor(its second operand): 2^m with m = floor(k / 16), no rounding
  // instruction of our own (k / 16 is exact).
  return _mm512_scalef_ps(mantissa, _mm512_mul_ps(k, _mm512_set1_ps(0.0625f)));
}

/// exp of 16 lanes whose values lie in [-87.3, 88] (or are NaN): exp16 without its clamp, for callers that
/// have bounded their argument already.
BRIGADE_AVX512_INLINE __m512 exp16_in_range(__m512 xc) {
  // k = round(x * 16 / ln2) by the shifter 1.5 * 2^23: one FMA rounds x * 16/ln2 + shifter to an integer
  // (the float's ulp there is 1), whose low mantissa bits are then k's own (k + 2^22, and 2^22 is a
  // multiple of 16), so they index the table with no conversion; subtracting the shifter gives k exactly.
  // r = x - k ln2/16 with ln2/16 in two parts (k * hi is exact: |k| <= 2401, 12 bits each).
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 shifted = _mm512_fmadd_ps(xc, _mm512_set1_ps(23.0831206542f), shifter);
  const __m512 k = _mm512_sub_ps(shifted, shifter);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.0433197021484375f), xc);  // ln2/16, high 12 bits
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.99663646e-06f), r);              // ln2/16 - high
  return exp16_from(k, _mm512_castps_si512(shifted), r);
}

/// exp(z ln2/16) for z in sixteenths of ln2, |z| < 2^11 (or NaN): for a caller that can fold the factor
/// 16/ln2 into its own constants (GELU). k = round(z) and z - k are exact, so r costs one multiply.
BRIGADE_AVX512_INLINE __m512 exp16_of_sixteenths(__m512 z) {
  const __m512 k = _mm512_roundscale_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return exp16_from(k, _mm512_cvtps_epi32(k),
                    _mm512_mul_ps(_mm512_sub_ps(z, k), _mm512_set1_ps(0.0433216989f)));  // ln2/16
}

/// exp of 16 lanes at most 88 (or NaN): exp16's bits with half its clamp and no overflow check, for the
/// softmax and cross-entropy rows (x - max, never positive) and attention's probabilities (s - max, or
/// s - lse, at most a rounding above 0). Below -87.3 the result is 0, as exp16's; +inf would give NaN.
BRIGADE_AVX512_INLINE __m512 exp16_not_above_88(__m512 x) {
  const __m512 low = _mm512_set1_ps(-87.3f);
  // vmaxps returns its second operand when one is NaN, and a NaN compares unordered: a NaN x stays NaN.
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, low, _CMP_NLT_UQ), exp16_in_range(_mm512_max_ps(low, x)));
}

/// exp of 16 lanes (see the file comment for the accuracy and the domain).
BRIGADE_AVX512_INLINE __m512 exp16(__m512 x) {
  // vmaxps returns its second operand when one is NaN: a NaN x stays NaN through the clamp.
  const __m512 high = _mm512_set1_ps(88.0f);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, high, _CMP_GT_OQ),
                              exp16_not_above_88(_mm512_min_ps(high, x)), _mm512_set1_ps(__builtin_inff()));
}

/// The sum of the 16 lanes in double, in a fixed order (8 + 8 widened, then a tree).
BRIGADE_AVX512_INLINE double sum16_in_double(__m512 v) {
  const Wide w = widen(v);
  return _mm512_reduce_add_pd(_mm512_add_pd(w.lo, w.hi));
}

}  // namespace brigade::kernels::cpu::detail

#endif  // BRIGADE_CPU_X86
