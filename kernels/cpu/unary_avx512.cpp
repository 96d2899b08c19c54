// float32 exp, log, sqrt, 1/sqrt, tanh and sigmoid on 16 lanes with AVX-512 and FMAs: the unary ops of
// ElementwiseKernel::CpuAvx512 (v3) beside GELU's (gelu_avx512.cpp). v1 and v2 call libm once an element
// (expf, logf, tanhf, and sqrtf, which g++ does not vectorise while it may set errno): 2-10 ns an element,
// 1-9 % of the copy rate on one Zen 4 core, where a vector of 16 costs ~10-40 instructions here.
//
// Bits and accuracy, against the formula in double rounded to float (tests/kernels/unary_avx512_test.cpp
// measures each over every 1009th float of the whole range, ~8.5 M values, and the special values):
//  - sqrt and 1/sqrt: vsqrtps and vdivps round correctly, as sqrtf and the division do: v1's bits.
//  - exp, at most 1 ulp: exp_avx512.h's table exp on the whole float range: below -87.3 it computes the
//    denormal results (exp16's row loops set them to 0), above 88.72 it overflows to +inf.
//  - log, 0 ulp on the sweep: the float widened to double and log_avx512.h's log8 (within ~4e-13
//    relative), rounded to float once: the correctly rounded log but within 4e-13 of a tie. Zero,
//    negatives, infinity and NaN by masks.
//  - tanh, at most 1 ulp: Cephes' form, in float, on |x| and then x's sign: below 0.625 an odd polynomial
//    |x| + |x|^3 P(x^2), above it 1 - 2 / (e^(2|x|) + 1) with exp16 (no cancellation there: the result is
//    above 0.55).
//  - sigmoid, at most 3 ulp: the formula's two forms, 1 / (1 + e^-x) and e^x / (1 + e^x), as one: e = e^-|x|,
//    then 1 / (1 + e) or e / (1 + e) by the sign; below 0 the sum's and the quotient's roundings add to
//    exp's.
// So exp, log, tanh and sigmoid have v3's own bits (as its GELU does), the same for every layout: strided
// runs are gathered into arrays (elementwise.cpp).
//
// Napkin math, one Zen 4 core at ~3.5 GHz (a 512-bit instruction takes a 256-bit pipe for two cycles):
// exp ~14 instructions a vector of 16, ~8 cycles; tanh and sigmoid ~25 and a division; log two double
// divisions (8 lanes each) and ~30 instructions; sqrt and 1/sqrt the square root's and the division's
// units. Reading and writing 8 bytes an element at ~60 GB/s (this core's 16 MiB copy rate) is ~8.5 cycles
// a vector. Measured at GPT-2's [1024, 768] (kernels_bench, docs/kernels.md): exp ~10 cycles a vector,
// sqrt ~10, sigmoid and 1/sqrt ~16, tanh ~22, log ~44 (its divisions).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // g++ 12's AVX-512 headers (exp_rows_avx512.cpp)
// The lambdas below are inlined into apply16 (BRIGADE_AVX512_LAMBDA): the ABI g++ warns about (a 64-byte
// vector returned without AVX-512) is never used.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <cstdint>

#include "kernels/cpu/elementwise.h"
#include "kernels/kernels.h"  // UnaryOp, unary_op_name
#include "tensor/error.h"

#if BRIGADE_CPU_X86
#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/log_avx512.h"
#endif

namespace brigade::kernels::cpu::detail {

#if BRIGADE_CPU_X86
namespace {

/// exp on the whole float range: exp16_in_range's table and polynomial, x clamped to [-104, 89] (exp(-104)
/// rounds to 0 and exp(89) overflows, so the clamp changes no result); NaN stays NaN (vmaxps and vminps
/// return their second operand when one is NaN).
BRIGADE_AVX512_INLINE __m512 exp_whole16(__m512 x) {
  return exp16_in_range(_mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x)));
}

/// log x: log8 on the two halves widened to double (every float, denormals too, is a normal double), then
/// the lanes log8 does not handle: log 0 = -inf, log of a negative = NaN, log +inf = +inf, NaN stays.
BRIGADE_AVX512_INLINE __m512 log16(__m512 x) {
  const Wide w = widen(x);
  const __m256 lo = _mm512_cvtpd_ps(log8(w.lo)), hi = _mm512_cvtpd_ps(log8(w.hi));
  __m512 y = _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
  const __m512 zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(__builtin_inff());
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ), _mm512_sub_ps(zero, inf));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, inf, _CMP_EQ_OQ), inf);
  // Negatives and NaN: x < 0 (ordered) or unordered; the quiet NaN of 0 * inf.
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, zero, _CMP_NGE_UQ), _mm512_mul_ps(zero, inf));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/// tanh x (Cephes' tanhf) on |x|, then x's sign (tanh is odd; -0 stays -0, NaN stays NaN): below 0.625
/// |x| + |x|^3 P(x^2), above it 1 - 2 / (e^(2|x|) + 1).
BRIGADE_AVX512_INLINE __m512 tanh16(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x), one = _mm512_set1_ps(1.0f);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(-5.70498872745e-3f), z, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
  const __m512 e = exp_whole16(_mm512_add_ps(ax, ax));  // +inf far out: 2 / inf = 0, the result 1
  const __m512 large = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  const __m512 magnitude =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ), large, small);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

/// sigmoid x: e = e^-|x| in (0, 1], then 1 / (1 + e) for x >= 0 and e / (1 + e) below (the formula's two
/// forms, so that nothing overflows).
BRIGADE_AVX512_INLINE __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp_whole16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
  const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_div_ps(_mm512_mask_mov_ps(one, below, e), _mm512_add_ps(one, e));
}

BRIGADE_AVX512_INLINE __m512 rsqrt16(__m512 x) {
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(x));
}

/// out[k] = f(a[k]) for k in [0, n), 16 lanes at a time, the tail under a mask.
template <typename F>
BRIGADE_AVX512_INLINE void apply16(float* out, const float* a, int64_t n, F f) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(out + k, f(_mm512_loadu_ps(a + k)));
  if (k < n) {
    const __mmask16 m = first_lanes(n - k);
    _mm512_mask_storeu_ps(out + k, m, f(_mm512_maskz_loadu_ps(m, a + k)));
  }
}

}  // namespace

bool has_unary_array_avx512(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
         op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
}

BRIGADE_AVX512 void unary_array_avx512(UnaryOp op, float* out, const float* a, int64_t n) {
  switch (op) {
    case UnaryOp::Exp:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return exp_whole16(x); });
    case UnaryOp::Log:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return log16(x); });
    case UnaryOp::Sqrt:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return _mm512_sqrt_ps(x); });
    case UnaryOp::Rsqrt:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return rsqrt16(x); });
    case UnaryOp::Tanh:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return tanh16(x); });
    case UnaryOp::Sigmoid:
      return apply16(out, a, n, [](__m512 x) BRIGADE_AVX512_LAMBDA { return sigmoid16(x); });
    default:
      BRIGADE_CHECK(false, "unary_array_avx512: ", unary_op_name(op), " has no AVX-512 array");
  }
}
#else
bool has_unary_array_avx512(UnaryOp) {
  return false;
}
#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
