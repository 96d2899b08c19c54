// Natural log of 8 doubles with AVX-512, for row loops that need one log a row (the attention's
// log-sum-exp): a block's eight logs in one vector instead of eight calls to libm's logf, each a call and a
// chain of ~20 dependent cycles that the row after it waits behind. Include only from code compiled for
// "avx512f,fma" and called where the CPU has both.
//
//   x = 2^e * f with f in [0.75, 1.5) (vgetmantpd; vgetexppd gives e, plus 1 where f came out below 1),
//   log f = 2 atanh(s), s = (f - 1) / (f + 1) in [-1/7, 1/5],
//   atanh(s) = s (1 + s^2/3 + s^4/5 + ... + s^14/15): the first term left out, s^16/17, is under 4e-13
//   of the sum, so the result is within ~4e-13 of log x relative (a double would need 5 more terms; the
//   callers round to float, whose half unit is 3e-8): rounded to float it is the correctly rounded float
//   log of x, but for values within 4e-13 of a tie.
// One division, 9 multiply-adds and the exponent's two instructions a vector.
//
// Domain: positive, finite, normal doubles (a float's sum of exps is one). Zero, negatives, NaN and
// infinity are not handled.
#pragma once

#include "kernels/cpu/avx512_rows.h"  // BRIGADE_CPU_X86, BRIGADE_AVX512_INLINE

#if BRIGADE_CPU_X86

namespace brigade::kernels::cpu::detail {

BRIGADE_AVX512_INLINE __m512d log8(__m512d x) {
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d f = _mm512_getmant_pd(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);
  // getexp is floor(log2 x); where the mantissa was >= 1.5, getmant halved it into [0.75, 1).
  const __m512d floor_log2 = _mm512_getexp_pd(x);
  const __m512d e = _mm512_mask_add_pd(floor_log2, _mm512_cmp_pd_mask(f, one, _CMP_LT_OQ), floor_log2, one);
  const __m512d s = _mm512_div_pd(_mm512_sub_pd(f, one), _mm512_add_pd(f, one));
  const __m512d s2 = _mm512_mul_pd(s, s);
  __m512d p = _mm512_set1_pd(1.0 / 15);
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 13));
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 11));
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 9));
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 7));
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 5));
  p = _mm512_fmadd_pd(p, s2, _mm512_set1_pd(1.0 / 3));
  p = _mm512_fmadd_pd(p, s2, one);
  const __m512d two_s = _mm512_add_pd(s, s);
  // e ln2 + 2 s p, ln2 in two parts so that e * hi is exact (|e| < 2^11, hi has 42 bits).
  const __m512d ln2_hi = _mm512_set1_pd(0x1.62e42fefa3800p-1), ln2_lo = _mm512_set1_pd(0x1.ef35793c76730p-45);
  return _mm512_fmadd_pd(e, ln2_hi, _mm512_fmadd_pd(two_s, p, _mm512_mul_pd(e, ln2_lo)));
}

}  // namespace brigade::kernels::cpu::detail

#endif
