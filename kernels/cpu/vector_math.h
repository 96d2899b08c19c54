// Float math several lanes at a time, for plain x86-64 (SSE2) builds. libm's expf/tanhf are opaque calls,
// one element at a time (~10-20 ns each: inside GELU they were ~13% of a small GPT's training step), and
// g++ 12 does not vectorise a scalar version of this code either: it threads the jumps of the argument
// clamp into separate paths ("control flow in loop"). So the functions are written on GCC/Clang vector
// types (portable: other targets lower them to whatever they have), as templates over the width: 4 lanes
// (16-byte vectors, any x86-64) or 8 lanes inside functions compiled for AVX2 (target attribute, picked at
// run time with cpu_has_avx2()). Every operation is lane by lane and there is no FMA, so all widths, and
// the scalar entry points (which run the 4-lane code on a broadcast value), give the same bits.
// Internal to kernels/cpu/; the float64 paths keep libm (their tests ask for 1e-12).
//
// A file that instantiates the 8-lane templates inside AVX2 functions gets -Wpsabi notes from g++ ("AVX
// vector return without AVX enabled changes the ABI") although they are always inlined and never called
// through the ABI; such a file disables -Wpsabi (see elementwise.cpp).
#pragma once

#include <cstdint>
#include <cstring>

// AVX2 code paths need GCC/Clang's target attribute and cpu-feature builtin, on x86-64.
// -DBRIGADE_CPU_NO_AVX2 leaves them out (to test the baseline code on an AVX2 machine).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(BRIGADE_CPU_NO_AVX2)
#define BRIGADE_CPU_AVX2 1
#else
#define BRIGADE_CPU_AVX2 0
#endif

#define BRIGADE_VECTOR_INLINE __attribute__((always_inline)) inline

namespace brigade::kernels::cpu::detail {

using f32x4 = float __attribute__((vector_size(16)));
using f32x8 = float __attribute__((vector_size(32)));   // only ever inside AVX2 functions
using f32x16 = float __attribute__((vector_size(64)));  // only ever inside AVX-512 functions

#if BRIGADE_CPU_AVX2
/// Whether this CPU (and OS: ymm registers saved on context switches) runs AVX2 code.
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

/// Every lane x, bit for bit (0 + x would turn -0 into +0, and a scalar GELU of -0 would then differ from
/// the arrays' lane).
inline f32x4 splat(float x) {
  return f32x4{x, x, x, x};
}

template <typename V>
BRIGADE_VECTOR_INLINE V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
BRIGADE_VECTOR_INLINE void store_v(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

inline f32x4 load4(const float* p) {
  return load_v<f32x4>(p);
}

inline void store4(float* p, f32x4 v) {
  store_v<f32x4>(p, v);
}

/// min(max(x, lo), hi) lane by lane (a NaN lane stays NaN).
template <typename V>
BRIGADE_VECTOR_INLINE V clamp_v(const V& x, float lo, float hi) {
  const V low = x < lo ? (V{} + lo) : x;
  return low > hi ? (V{} + hi) : low;
}

/// exp(x) within 2 ulp of the exact value for x in [-87.3, 88] (Cephes' expf: x = n ln2 + r with
/// |r| <= ln2 / 2, exp(r) = 1 + r + r^2 p(r) with p of degree 5, then 2^n put in the exponent bits). p is
/// evaluated by Estrin's scheme, pairs of terms joined by powers of r^2: 3 dependent multiply-adds instead
/// of Horner's 5, so more of a row's exps are in flight at once (the cross_entropy_nograd bench at GPT-2
/// size: ~7 % faster); max error over the range 0.967 ulp, against Horner's 0.976. Below -87.3 the
/// result is 0 (the exact value is below 1.2e-38: a denormal or 0), above 88 it is +inf (exp overflows
/// float at 88.72; the narrow band in between is taken as overflow too: no caller goes there). NaN gives
/// NaN.
template <typename V>
BRIGADE_VECTOR_INLINE V exp_v(const V& x) {
  using I = decltype(x < x);  // the int32 vector of the same width
  constexpr float kLow = -87.3f, kHigh = 88.0f;
  const V xc = clamp_v(x, kLow, kHigh);
  // n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest, no SSE4.1 roundps needed).
  const V round = (V{} + 12582912.0f);
  const V n = (xc * 1.44269504088896341f + round) - round;
  // r = x - n ln2, with ln2 split in two so that n * kLn2Hi is exact.
  const V r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  const V r2 = r * r;
  const V p45 = r * 1.9875691500e-4f + 1.3981999507e-3f;
  const V p23 = r * 8.3334519073e-3f + 4.1665795894e-2f;
  const V p01 = r * 1.6666665459e-1f + 5.0000001201e-1f;
  V p = (p45 * r2 + p23) * r2 + p01;
  p = p * r2 + r + 1.0f;
  // n lies in [-126, 127] after the clamp: 2^n is a normal float.
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;
  V e = p * __builtin_bit_cast(V, bits);
  e = x < kLow ? (V{} + 0.0f) : e;
  return x > kHigh ? (V{} + __builtin_inff()) : e;
}

inline f32x4 exp4(f32x4 x) {
  return exp_v(x);
}

// GELU, tanh form, rewritten without tanh: 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3). Relative error a few ulp (the tanh form in float loses all relative
// accuracy for x < -3, where 1 + tanh(u) cancels). Beyond |u| = 40, sigmoid(2u) is 1 to float precision
// or below 2e-35: the result is then taken as x, or x * 0 (the tanh form's value: -0 for finite x, NaN for
// -inf). NaN propagates through x.
inline constexpr float kGeluULimit = 40.0f;

template <typename V>
BRIGADE_VECTOR_INLINE V gelu_v(const V& x) {
  const V u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  const V y = x / (1.0f + exp_v(-2.0f * clamp_v(u, -kGeluULimit, kGeluULimit)));
  return u < -kGeluULimit ? x * 0.0f : y;
}

/// g * d gelu / dx. With s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):
///   d/dx [x s] = s + x * 2 s (1 - s) du/dx,  1 - s = e s (no cancellation),
///   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
/// Beyond |u| = 40 the second term is below float resolution and s is 1, or 0 (taken as x * 0, as above).
template <typename V>
BRIGADE_VECTOR_INLINE V gelu_grad_v(const V& g, const V& x) {
  const V x2 = x * x;
  const V u = 0.7978845608028654f * (x + 0.044715f * x2 * x);
  const V du = 0.7978845608028654f * (1.0f + (3.0f * 0.044715f) * x2);
  const V e = exp_v(-2.0f * clamp_v(u, -kGeluULimit, kGeluULimit));
  const V s = 1.0f / (1.0f + e);
  V d = s + 2.0f * x * (e * s) * s * du;
  d = u > kGeluULimit ? (V{} + 1.0f) : d;
  d = u < -kGeluULimit ? x * 0.0f : d;
  return g * d;
}

inline float gelu_float(float x) {
  return gelu_v(splat(x))[0];
}

inline float gelu_grad_float(float g, float x) {
  return gelu_grad_v(splat(g), splat(x))[0];
}

/// out[k] = gelu(a[k]) for k in [0, n), V's lanes at a time; the tail goes through a zero-padded vector.
template <typename V>
BRIGADE_VECTOR_INLINE void gelu_array(float* out, const float* a, int64_t n) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  int64_t k = 0;
  for (; k + L <= n; k += L) store_v(out + k, gelu_v(load_v<V>(a + k)));
  if (k < n) {
    float in[L] = {}, res[L];
    std::memcpy(in, a + k, static_cast<size_t>(n - k) * sizeof(float));
    store_v(res, gelu_v(load_v<V>(in)));
    std::memcpy(out + k, res, static_cast<size_t>(n - k) * sizeof(float));
  }
}

/// out[k] = g[k] * gelu'(a[k]) for k in [0, n), as gelu_array.
template <typename V>
BRIGADE_VECTOR_INLINE void gelu_grad_array(float* out, const float* g, const float* a, int64_t n) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  int64_t k = 0;
  for (; k + L <= n; k += L) store_v(out + k, gelu_grad_v(load_v<V>(g + k), load_v<V>(a + k)));
  if (k < n) {
    float in_g[L] = {}, in_a[L] = {}, res[L];
    std::memcpy(in_g, g + k, static_cast<size_t>(n - k) * sizeof(float));
    std::memcpy(in_a, a + k, static_cast<size_t>(n - k) * sizeof(float));
    store_v(res, gelu_grad_v(load_v<V>(in_g), load_v<V>(in_a)));
    std::memcpy(out + k, res, static_cast<size_t>(n - k) * sizeof(float));
  }
}

}  // namespace brigade::kernels::cpu::detail
