// Float math four lanes at a time, for plain x86-64 (SSE2) builds. libm's expf/tanhf are opaque calls, one
// element at a time (~10-20 ns each: inside GELU they were ~13% of a small GPT's training step), and g++
// 12 does not vectorise a scalar version of this code either: it threads the jumps of the argument clamp
// into separate paths ("control flow in loop"). So the functions are written on GCC/Clang vector types
// (portable: other targets lower them to whatever they have), and the scalar entry points run the same
// vector code on a broadcast value, so that a strided element and a contiguous one give the same bits.
// Internal to kernels/cpu/; the float64 paths keep libm (their tests ask for 1e-12).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace brigade::kernels::cpu::detail {

using f32x4 = float __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));

inline f32x4 splat(float x) {
  return f32x4{x, x, x, x};
}

inline f32x4 load4(const float* p) {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store4(float* p, f32x4 v) {
  std::memcpy(p, &v, sizeof v);
}

/// min(max(x, lo), hi) lane by lane (a NaN lane becomes lo).
inline f32x4 clamp4(f32x4 x, float lo, float hi) {
  x = x < lo ? splat(lo) : x;
  return x > hi ? splat(hi) : x;
}

/// exp(x) within 2 ulp of the exact value for x in [-87.3, 88] (Cephes' expf: x = n ln2 + r with
/// |r| <= ln2 / 2, a degree-6 polynomial for exp(r), then 2^n put in the exponent bits). Below -87.3 the
/// result is 0 (the exact value is below 1.2e-38: a denormal or 0), above 88 it is +inf (exp overflows
/// float at 88.72; the narrow band in between is taken as overflow too: no caller goes there). NaN gives
/// NaN.
inline f32x4 exp4(f32x4 x) {
  constexpr float kLow = -87.3f, kHigh = 88.0f;
  const f32x4 xc = clamp4(x, kLow, kHigh);
  // n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest, no SSE4.1 roundps needed).
  const f32x4 round = splat(12582912.0f);
  const f32x4 n = (xc * 1.44269504088896341f + round) - round;
  // r = x - n ln2, with ln2 split in two so that n * kLn2Hi is exact.
  const f32x4 r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  f32x4 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n lies in [-126, 127] after the clamp: 2^n is a normal float.
  const i32x4 bits = (__builtin_convertvector(n, i32x4) + 127) << 23;
  f32x4 e = p * std::bit_cast<f32x4>(bits);
  e = x < kLow ? splat(0.0f) : e;
  return x > kHigh ? splat(__builtin_inff()) : e;
}

/// e[j] = exp(x[j] - shift) for j in [0, n) (x[j] - shift in float), and returns the sum of the e[j] in
/// double (four lane sums, added at the end: a fixed order).
inline double exp_shifted_sum(const float* x, float shift, float* e, int64_t n) {
  double lanes[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const f32x4 v = exp4(load4(x + k) - shift);
    store4(e + k, v);
    for (int l = 0; l < 4; ++l) lanes[l] += static_cast<double>(v[l]);
  }
  for (; k < n; ++k) {
    const float v = exp4(splat(x[k] - shift))[0];
    e[k] = v;
    lanes[0] += static_cast<double>(v);
  }
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/// The largest of x[0..n) (n >= 1). NaN elements are skipped unless x[0] is NaN; the callers' sums turn a
/// row with a NaN into NaN either way.
inline float max_of(const float* x, int64_t n) {
  f32x4 best = splat(x[0]);
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const f32x4 v = load4(x + k);
    best = v > best ? v : best;
  }
  float m = best[0];
  for (int l = 1; l < 4; ++l) m = best[l] > m ? best[l] : m;
  for (; k < n; ++k) m = x[k] > m ? x[k] : m;
  return m;
}

// GELU, tanh form, rewritten without tanh: 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3). Relative error a few ulp (the tanh form in float loses all relative
// accuracy for x < -3, where 1 + tanh(u) cancels). Beyond |u| = 40, sigmoid(2u) is 1 to float precision
// or below 2e-35: the result is then taken as x, or x * 0 (the tanh form's value: -0 for finite x, NaN for
// -inf). NaN propagates through x.
inline constexpr float kGeluULimit = 40.0f;

inline f32x4 gelu4(f32x4 x) {
  const f32x4 u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  const f32x4 y = x / (1.0f + exp4(-2.0f * clamp4(u, -kGeluULimit, kGeluULimit)));
  return u < -kGeluULimit ? x * 0.0f : y;
}

/// g * d gelu / dx. With s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):
///   d/dx [x s] = s + x * 2 s (1 - s) du/dx,  1 - s = e s (no cancellation),
///   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
/// Beyond |u| = 40 the second term is below float resolution and s is 1, or 0 (taken as x * 0, as above).
inline f32x4 gelu_grad4(f32x4 g, f32x4 x) {
  const f32x4 x2 = x * x;
  const f32x4 u = 0.7978845608028654f * (x + 0.044715f * x2 * x);
  const f32x4 du = 0.7978845608028654f * (1.0f + (3.0f * 0.044715f) * x2);
  const f32x4 e = exp4(-2.0f * clamp4(u, -kGeluULimit, kGeluULimit));
  const f32x4 s = 1.0f / (1.0f + e);
  f32x4 d = s + 2.0f * x * (e * s) * s * du;
  d = u > kGeluULimit ? splat(1.0f) : d;
  d = u < -kGeluULimit ? x * 0.0f : d;
  return g * d;
}

/// out[k] = f(a[k]) for k in [0, n), four at a time; the tail goes through a zero-padded vector.
template <typename F>
void map4(float* out, const float* a, int64_t n, F f) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) store4(out + k, f(load4(a + k)));
  if (k < n) {
    float in[4] = {}, res[4];
    std::memcpy(in, a + k, static_cast<size_t>(n - k) * sizeof(float));
    store4(res, f(load4(in)));
    std::memcpy(out + k, res, static_cast<size_t>(n - k) * sizeof(float));
  }
}

/// out[k] = f(a[k], b[k]) for k in [0, n), as map4.
template <typename F>
void map4(float* out, const float* a, const float* b, int64_t n, F f) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) store4(out + k, f(load4(a + k), load4(b + k)));
  if (k < n) {
    float in_a[4] = {}, in_b[4] = {}, res[4];
    std::memcpy(in_a, a + k, static_cast<size_t>(n - k) * sizeof(float));
    std::memcpy(in_b, b + k, static_cast<size_t>(n - k) * sizeof(float));
    store4(res, f(load4(in_a), load4(in_b)));
    std::memcpy(out + k, res, static_cast<size_t>(n - k) * sizeof(float));
  }
}

inline float gelu_float(float x) {
  return gelu4(splat(x))[0];
}

inline float gelu_grad_float(float g, float x) {
  return gelu_grad4(splat(g), splat(x))[0];
}

}  // namespace brigade::kernels::cpu::detail
