// float32 GELU and its gradient on 16 lanes with fused multiply-adds: ElementwiseKernel::CpuAvx512 (v3).
// The formulas are v1's (kernels/cpu/vector_math.h: gelu_v, gelu_grad_v, the tanh form written as
// x * sigmoid(2u) without tanh), with exp_avx512.h's table exp instead of exp_v and FMAs where the products
// meet sums; so the bits differ from v1 and v2 (tests/kernels/exp_rows_test.cpp holds both within the
// same bound of the formula in double), and every layout and thread count of v3 gives v3's bits.
//
// Napkin math (one core, ~3.5 GHz): forward ~26 instructions per 16 lanes. The exp's argument -2u comes
// straight out of u's polynomial in the exp's own unit (sixteenths of ln2: the factors sqrt(2/pi), -2 and
// 16/ln2 folded into its two constants), so the exp is ~10 of them; 1/(1 + e) is vrcp14ps and a Newton
// step (vdivps would hold the divider for several cycles a vector). On this Zen 4 a 512-bit instruction
// takes a 256-bit pipe for two cycles, so ~1.3 of them retire a cycle: measured ~18 cycles a vector in L1
// (5.2 ns), ~3 G elements per second. Reading x and writing y is 8 bytes an element: at 28.6 GB/s, 3.6 G
// elements per second, so the loop is bound by its instructions about as much as by memory, even from
// DRAM. Backward reads 2 arrays and writes 1 (12 bytes), ~33 instructions: ~26 cycles a vector (7.3 ns).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // g++ 12's AVX-512 headers (exp_rows_avx512.cpp)

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/vector_math.h"  // kGeluULimit
#include "tensor/bf16_lanes_avx512.h"

namespace brigade::kernels::cpu::detail {

#if BRIGADE_CPU_X86
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// -2u in sixteenths of ln2, the unit exp16_of_sixteenths takes: z = x (kZLinear + kZCubic x^2), with
// kZLinear = -2 sqrt(2/pi) 16/ln2 and kZCubic = 0.044715 kZLinear, so that the three multiplies by
// sqrt(2/pi), by -2 and by 16/ln2 are folded into the polynomial's constants. u = +-kGeluULimit is
// z = -+kZLimit.
constexpr float kZLinear = -36.8353311703f;
constexpr float kZCubic = -1.64709183328f;
constexpr float kZLimit = kGeluULimit * 2.0f * 23.0831206542f;

/// z = -2u (in sixteenths of ln2) and e = exp(-2u), with u clamped to +-kGeluULimit: u below -kGeluULimit
/// is z above kZLimit.
struct GeluParts {
  __m512 z, e;
};

BRIGADE_AVX512_INLINE GeluParts gelu_parts(__m512 x, __m512 x2) {
  const __m512 z = _mm512_mul_ps(x, _mm512_fmadd_ps(x2, _mm512_set1_ps(kZCubic), _mm512_set1_ps(kZLinear)));
  const __m512 limit = _mm512_set1_ps(kZLimit);
  // vmaxps returns its second operand when one is NaN: a NaN z stays NaN.
  const __m512 zc = _mm512_min_ps(limit, _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), limit), z));
  return {z, exp16_of_sixteenths(zc)};
}

/// 1 / d for d in [1, e^80]: the 14-bit estimate vrcp14ps refined by one Newton step,
/// r' = r + r (1 - d r), to about an ulp (the relative error squares: 2^-28, then the FMAs' roundings).
/// Three instructions that pipeline, where vdivps holds its unit for several cycles a vector.
BRIGADE_AVX512_INLINE __m512 reciprocal16(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r, r);
}

/// gelu(x) = x / (1 + exp(-2u)); below u = -40 it is x * 0 (v1's value there).
BRIGADE_AVX512_INLINE __m512 gelu16(__m512 x) {
  const GeluParts p = gelu_parts(x, _mm512_mul_ps(x, x));
  const __m512 y = _mm512_mul_ps(x, reciprocal16(_mm512_add_ps(_mm512_set1_ps(1.0f), p.e)));
  const __mmask16 far_left = _mm512_cmp_ps_mask(p.z, _mm512_set1_ps(kZLimit), _CMP_GT_OQ);
  return _mm512_mask_blend_ps(far_left, y, _mm512_mul_ps(x, _mm512_setzero_ps()));
}

/// g * gelu'(x) = g (s + 2 x (e s) s du/dx), s = 1 / (1 + e), du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2);
/// beyond u = +40 the derivative is 1, below -40 it is x * 0 (as v1).
BRIGADE_AVX512_INLINE __m512 gelu_grad16(__m512 g, __m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const GeluParts p = gelu_parts(x, x2);
  const __m512 du = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                  _mm512_fmadd_ps(x2, _mm512_set1_ps(3.0f * kCubic), _mm512_set1_ps(1.0f)));
  const __m512 s = reciprocal16(_mm512_add_ps(_mm512_set1_ps(1.0f), p.e));
  const __m512 two_x_es = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(x, x), p.e), s);
  __m512 d = _mm512_fmadd_ps(_mm512_mul_ps(two_x_es, s), du, s);
  d = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(p.z, _mm512_set1_ps(-kZLimit), _CMP_LT_OQ), d,
                           _mm512_set1_ps(1.0f));
  d = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(p.z, _mm512_set1_ps(kZLimit), _CMP_GT_OQ), d,
                           _mm512_mul_ps(x, _mm512_setzero_ps()));
  return _mm512_mul_ps(g, d);
}

}  // namespace

BRIGADE_AVX512 void gelu_array_avx512_fma(float* out, const float* a, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(out + k, gelu16(_mm512_loadu_ps(a + k)));
  if (k < n) {
    const __mmask16 m = first_lanes(n - k);
    _mm512_mask_storeu_ps(out + k, m, gelu16(_mm512_maskz_loadu_ps(m, a + k)));
  }
}

BRIGADE_AVX512 void gelu_grad_array_avx512_fma(float* out, const float* g, const float* a, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    _mm512_storeu_ps(out + k, gelu_grad16(_mm512_loadu_ps(g + k), _mm512_loadu_ps(a + k)));
  }
  if (k < n) {
    const __mmask16 m = first_lanes(n - k);
    _mm512_mask_storeu_ps(out + k, m,
                          gelu_grad16(_mm512_maskz_loadu_ps(m, g + k), _mm512_maskz_loadu_ps(m, a + k)));
  }
}

BRIGADE_AVX512 void bias_gelu_row_avx512_fma(float* y, const float* x, const float* b, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    _mm512_storeu_ps(y + k, gelu16(_mm512_add_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(b + k))));
  }
  if (k < n) {
    const __mmask16 m = first_lanes(n - k);
    const __m512 h = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + k), _mm512_maskz_loadu_ps(m, b + k));
    _mm512_mask_storeu_ps(y + k, m, gelu16(h));
  }
}

BRIGADE_AVX512 void bias_gelu_grad_row_avx512_fma(float* dx, const float* dy, const float* x, const float* b,
                                                  int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512 h = _mm512_add_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(b + k));
    _mm512_storeu_ps(dx + k, gelu_grad16(_mm512_loadu_ps(dy + k), h));
  }
  if (k < n) {
    const __mmask16 m = first_lanes(n - k);
    const __m512 h = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + k), _mm512_maskz_loadu_ps(m, b + k));
    _mm512_mask_storeu_ps(dx + k, m, gelu_grad16(_mm512_maskz_loadu_ps(m, dy + k), h));
  }
}

// bfloat16 rows: the same lanes, every cast in registers (bf16_lanes_avx512.h). The unfused ops widen x and
// b, add in float and round the sum to bfloat16 (binary Add's store), widen it again for the GELU, and
// round its result (or widen dy and round dx); here each of those casts is two to ten instructions between
// the loads and the store, where the array path ran seven passes over stack buffers. In L1 a vector takes
// ~11 ns against float's ~6: the two roundings are ~20 of its ~50 instructions. A row's last partial
// vector goes through 16-element buffers (bfloat16 has no masked 16-bit loads without AVX512-BW).
namespace {

/// Copies n < 16 bfloat16 into a zeroed 16-element buffer.
struct Bf16Tail {
  bfloat16 v[16];
  Bf16Tail(const bfloat16* p, int64_t n) {
    for (int64_t k = 0; k < 16; ++k) v[k] = k < n ? p[k] : bfloat16::from_bits(0);
  }
};

/// float(bfloat16(x + b)): the sum rounded as binary(Add) stores it in bfloat16.
BRIGADE_AVX512_INLINE __m512 rounded_sum_bf16(const bfloat16* x, const bfloat16* b) {
  return bf16_lanes::round_to_bf16(_mm512_add_ps(bf16_lanes::load(x), bf16_lanes::load(b)));
}

}  // namespace

BRIGADE_AVX512 void bias_gelu_row_avx512_bf16(bfloat16* y, const bfloat16* x, const bfloat16* b, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) bf16_lanes::store(y + k, gelu16(rounded_sum_bf16(x + k, b + k)));
  if (k < n) {
    const Bf16Tail xt(x + k, n - k), bt(b + k, n - k);
    bfloat16 out[16];
    bf16_lanes::store(out, gelu16(rounded_sum_bf16(xt.v, bt.v)));
    for (int64_t i = 0; i < n - k; ++i) y[k + i] = out[i];
  }
}

BRIGADE_AVX512 void bias_gelu_grad_row_avx512_bf16(bfloat16* dx, const bfloat16* dy, const bfloat16* x,
                                                   const bfloat16* b, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    bf16_lanes::store(dx + k, gelu_grad16(bf16_lanes::load(dy + k), rounded_sum_bf16(x + k, b + k)));
  }
  if (k < n) {
    const Bf16Tail gt(dy + k, n - k), xt(x + k, n - k), bt(b + k, n - k);
    bfloat16 out[16];
    bf16_lanes::store(out, gelu_grad16(bf16_lanes::load(gt.v), rounded_sum_bf16(xt.v, bt.v)));
    for (int64_t i = 0; i < n - k; ++i) dx[k + i] = out[i];
  }
}
#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
