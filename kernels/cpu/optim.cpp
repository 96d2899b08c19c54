// CPU backend: the AdamW update (in place; v1 in double, stored back to the parameter's and the moments'
// dtypes; v2 in float on AVX-512), of one parameter or of a whole list in one parallel loop (adamw_all: the
// multi-tensor optimizer step), and the sum of squares behind global_l2_norm (deterministic chunked double
// sum).
//
// Napkin math for v2, one core of this EPYC (Zen 4): an element reads 16 bytes (p, g, m, v) and writes 12
// (p, m, v). The baby GPT's 0.4-0.8 M parameters (11-22 MB a step) stay in L3, where one core copies at
// ~60 GB/s: ~0.2-0.4 ms if memory bound. v1's double lanes spend a vsqrtpd and a vdivpd on every 8
// elements, each holding its unit for many cycles on 512-bit double vectors: the update measured ~0.37 ms
// for 0.41 M elements (31 GB/s), where PyTorch's fused float update took ~0.22. v2 does 16 lanes in float
// per vsqrtps and vdivps, ~12 other instructions a vector: ~0.13 ms (89 GB/s). GPT-2's 124 M parameters
// (3.5 GB a step) come from DRAM: v1 measured 26-30 GB/s there (the divider binds it still), v2 42-47 GB/s,
// PyTorch's fused update 46-51 GB/s.
//
// Why one loop over every parameter: a model's parameters are many small tensors (the baby GPT: 50
// tensors, none over 65k elements, under kParallelGrain, so each update ran on one thread) and a call per
// tensor pays its checks, its bias-correction pow()s and its parallel region each time. adamw_all cuts
// every tensor into segments of 32k elements and shares the flat list out to one thread team (the baby
// GPT's 0.8 M elements: every thread, one region). Each element's arithmetic is the same as a
// call per tensor, so the bits are too.
// g++ 12 warns "__Y is used uninitialized" inside _mm512_cvtps_pd (its _mm512_undefined_pd pass-through
// operand, fully overwritten under an all-ones mask): a known false positive of its headers. Before the
// includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/adamw_versions.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fused.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

// Vectors of 8 elements per OpenMP chunk of the AVX-512 loop (elementwise: any split gives the same bits).
constexpr int64_t kChunk = 4096;

/// adamw_impl's loop constants, for the AVX-512 loop.
struct AdamWConstants {
  double beta1, beta2, lr, eps, weight_decay, inv_bias1, inv_bias2;
};

#if defined(__x86_64__) && defined(__GNUC__)
// Eight float elements per iteration, widened to double: the same operations in the same order as the
// scalar loop (IEEE add, mul, div and sqrt are correctly rounded, and fp-contract=off keeps a multiply and
// an add from fusing), so the bits equal the scalar loop's. The scalar loop waits on one double division
// and one square root per element (libm's sqrt with errno keeps g++ from vectorising it); eight lanes
// share each here. Returns the elements done (a multiple of 8); the caller finishes the rest.
// g++ 12 warns "__Y may be used uninitialized" inside _mm512_cvtps_pd, _mm512_cvtpd_ps and _mm512_sqrt_pd
// (their _mm512_undefined_* pass-through operand, fully overwritten by an all-ones mask): a known false
// positive of its headers, silenced for this function only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), optimize("fp-contract=off"))) int64_t adamw_float_avx512(
    float* pp, const float* gp, float* mp, float* vp, int64_t begin, int64_t end, const AdamWConstants& c) {
  const __m512d beta1 = _mm512_set1_pd(c.beta1), one_minus_beta1 = _mm512_set1_pd(1.0 - c.beta1);
  const __m512d beta2 = _mm512_set1_pd(c.beta2), one_minus_beta2 = _mm512_set1_pd(1.0 - c.beta2);
  const __m512d lr = _mm512_set1_pd(c.lr), eps = _mm512_set1_pd(c.eps), wd = _mm512_set1_pd(c.weight_decay);
  const __m512d inv_bias1 = _mm512_set1_pd(c.inv_bias1), inv_bias2 = _mm512_set1_pd(c.inv_bias2);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m512d g = _mm512_cvtps_pd(_mm256_loadu_ps(gp + i));
    const __m512d m_old = _mm512_cvtps_pd(_mm256_loadu_ps(mp + i));
    const __m512d v_old = _mm512_cvtps_pd(_mm256_loadu_ps(vp + i));
    const __m512d m_new = _mm512_add_pd(_mm512_mul_pd(beta1, m_old), _mm512_mul_pd(one_minus_beta1, g));
    const __m512d v_new =
        _mm512_add_pd(_mm512_mul_pd(beta2, v_old), _mm512_mul_pd(_mm512_mul_pd(one_minus_beta2, g), g));
    _mm256_storeu_ps(mp + i, _mm512_cvtpd_ps(m_new));
    _mm256_storeu_ps(vp + i, _mm512_cvtpd_ps(v_new));
    const __m512d m_hat = _mm512_mul_pd(m_new, inv_bias1), v_hat = _mm512_mul_pd(v_new, inv_bias2);
    const __m512d p = _mm512_cvtps_pd(_mm256_loadu_ps(pp + i));
    const __m512d adaptive = _mm512_div_pd(m_hat, _mm512_add_pd(_mm512_sqrt_pd(v_hat), eps));
    const __m512d update = _mm512_mul_pd(lr, _mm512_add_pd(adaptive, _mm512_mul_pd(wd, p)));
    _mm256_storeu_ps(pp + i, _mm512_cvtpd_ps(_mm512_sub_pd(p, update)));
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

#if defined(__x86_64__) && defined(__GNUC__)
// v2: sixteen float elements per iteration, all in float: the moments by FMAs (beta * m + (1 - beta) * g,
// the product (1 - beta) * g rounded first), one vsqrtps and one vdivps, the decay and the step as two more
// FMAs, p - lr * (adaptive + wd * p). A masked last vector, so every element of a segment gets the same
// arithmetic. Against v1 in double, each stored value is within two or three float roundings of the terms
// that make it (a moment whose two terms cancel can be many ulps of itself off; tests/kernels/
// cpu_fast_paths_test.cpp measures it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,fma"))) void adamw_float_v2_avx512(float* pp, const float* gp, float* mp,
                                                                  float* vp, int64_t begin, int64_t end,
                                                                  const AdamWConstants& c) {
  const __m512 beta1 = _mm512_set1_ps(static_cast<float>(c.beta1));
  const __m512 one_minus_beta1 = _mm512_set1_ps(static_cast<float>(1.0 - c.beta1));
  const __m512 beta2 = _mm512_set1_ps(static_cast<float>(c.beta2));
  const __m512 one_minus_beta2 = _mm512_set1_ps(static_cast<float>(1.0 - c.beta2));
  const __m512 lr = _mm512_set1_ps(static_cast<float>(c.lr)), eps = _mm512_set1_ps(static_cast<float>(c.eps));
  const __m512 wd = _mm512_set1_ps(static_cast<float>(c.weight_decay));
  const __m512 inv_bias1 = _mm512_set1_ps(static_cast<float>(c.inv_bias1));
  const __m512 inv_bias2 = _mm512_set1_ps(static_cast<float>(c.inv_bias2));
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 k = end - i >= 16 ? static_cast<__mmask16>(0xffff)
                                      : static_cast<__mmask16>((1u << static_cast<unsigned>(end - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(k, gp + i);
    const __m512 m_new =
        _mm512_fmadd_ps(beta1, _mm512_maskz_loadu_ps(k, mp + i), _mm512_mul_ps(one_minus_beta1, g));
    const __m512 v_new = _mm512_fmadd_ps(beta2, _mm512_maskz_loadu_ps(k, vp + i),
                                         _mm512_mul_ps(_mm512_mul_ps(one_minus_beta2, g), g));
    _mm512_mask_storeu_ps(mp + i, k, m_new);
    _mm512_mask_storeu_ps(vp + i, k, v_new);
    const __m512 denominator = _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(v_new, inv_bias2)), eps);
    const __m512 adaptive = _mm512_div_ps(_mm512_mul_ps(m_new, inv_bias1), denominator);
    const __m512 p = _mm512_maskz_loadu_ps(k, pp + i);
    _mm512_mask_storeu_ps(pp + i, k, _mm512_fnmadd_ps(lr, _mm512_fmadd_ps(wd, p, adaptive), p));
  }
}
#pragma GCC diagnostic pop
#endif

/// The update of elements [begin, end) of one parameter. v1: eight at a time on AVX-512 (float), the rest by
/// the scalar loop, the same bits either way. v2 (float32 only; the other dtypes run v1):
/// adamw_float_v2_avx512.
template <typename T>
void adamw_range(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m,
                 const Tensor& v, const AdamWStep& s, int64_t begin, int64_t end) {
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;  // the moments' dtype
  auto* pp = param.data<T>();
  const auto* gp = static_cast<const T*>(grad.data_ptr());
  auto* mp = m.data<S>();
  auto* vp = v.data<S>();
  const double step = static_cast<double>(s.step);
  // Loop constants in locals (a store through pp may alias a double field of `s` for float64), and the
  // bias corrections as reciprocals: one division per element (the adaptive step) instead of three;
  // division and sqrt throughput are what this loop waits on.
  const double beta1 = s.beta1, beta2 = s.beta2, lr = s.lr, eps = s.eps, weight_decay = s.weight_decay;
  const double inv_bias1 = 1.0 / (1.0 - std::pow(beta1, step));
  const double inv_bias2 = 1.0 / (1.0 - std::pow(beta2, step));
  int64_t i = begin;
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<T, float>) {
    const AdamWConstants constants{beta1, beta2, lr, eps, weight_decay, inv_bias1, inv_bias2};
    if (kernel == AdamWKernel::CpuAvx512) return adamw_float_v2_avx512(pp, gp, mp, vp, begin, end, constants);
    if (cpu_features().avx512f) i = adamw_float_avx512(pp, gp, mp, vp, begin, end, constants);
  }
#endif
  for (; i < end; ++i) {
    const double g = static_cast<double>(gp[i]);
    const double m_new = beta1 * static_cast<double>(mp[i]) + (1.0 - beta1) * g;
    const double v_new = beta2 * static_cast<double>(vp[i]) + (1.0 - beta2) * g * g;
    mp[i] = static_cast<S>(m_new);
    vp[i] = static_cast<S>(v_new);
    const double m_hat = m_new * inv_bias1, v_hat = v_new * inv_bias2;
    const double p = static_cast<double>(pp[i]);
    // Decoupled weight decay: the decay term is not divided by the adaptive denominator.
    pp[i] = static_cast<T>(p - lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * p));
  }
}

/// A piece of one parameter for the parallel loops: elements [begin, end) of entry `entry`.
struct Segment {
  size_t entry;
  int64_t begin, end;
};

/// Every entry cut into segments of at most kChunk vectors of 8: a flat list that one parallel loop shares
/// out, whatever the sizes of the tensors (a model has a few large weights and many small biases).
std::vector<Segment> segments_of(const std::vector<AdamWTensors>& tensors, int64_t* total) {
  std::vector<Segment> out;
  *total = 0;
  for (size_t e = 0; e < tensors.size(); ++e) {
    const int64_t n = tensors[e].param.numel();
    for (int64_t begin = 0; begin < n; begin += kChunk * 8)
      out.push_back({e, begin, std::min(n, begin + kChunk * 8)});
    *total += n;
  }
  return out;
}

void adamw_segments(AdamWKernel kernel, const std::vector<AdamWTensors>& tensors) {
  int64_t total = 0;
  const std::vector<Segment> segments = segments_of(tensors, &total);
  const int64_t count = static_cast<int64_t>(segments.size());
#pragma omp parallel for if (total >= kParallelGrain) schedule(dynamic, 1)
  for (int64_t k = 0; k < count; ++k) {
    const Segment& seg = segments[static_cast<size_t>(k)];
    const AdamWTensors& t = tensors[seg.entry];
    BRIGADE_DISPATCH_FLOATING(t.param.dtype(), "adamw_update_all", [&] {
      adamw_range<scalar_t>(kernel, t.param, t.grad, t.m, t.v, t.step, seg.begin, seg.end);
    });
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
/// chunk_sum of x[i]^2 over [start, end) for float x, compiled for AVX-512: the eight running sums are the
/// lanes of one vector of doubles, each lane its own multiply and add in chunk_sum's order (a float's square
/// is exact in double, so g++ fusing the multiply into the add changes no bit), so the bits are those of the
/// baseline loop, whose SSE2 vectors hold two sums each. A gradient's squares were bound by those narrow
/// conversions, multiplies and adds (~1.6 cycles an element, 1.2 % of the baby GPT's step).
__attribute__((target("avx512f"), noinline)) double chunk_sum_squares_avx512(const float* x, int64_t start,
                                                                             int64_t end) {
  double sums[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int64_t i = start;
  for (; i + 8 <= end; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const double v = static_cast<double>(x[i + l]);
      sums[l] += v * v;
    }
  }
  for (; i < end; ++i) {
    const double v = static_cast<double>(x[i]);
    sums[0] += v * v;
  }
  return detail::pairwise_sum8(sums);
}

/// chunk_sum_squares_avx512 of four whole chunks at once (x holds 4 * kSumChunk floats), into sums[0..4):
/// each chunk's eight running sums are one vector's lanes, with the same multiply and add per element, so
/// the bits are the one-chunk loop's. One chunk's vector chain waits ~3 cycles an add (8 elements); four
/// chunks' chains overlap, so the loads and conversions set the pace instead.
__attribute__((target("avx512f"), noinline)) void four_chunk_sums_squares_avx512(const float* x,
                                                                                 double* sums) {
  constexpr int64_t kChunk = detail::kSumChunk;
  __m512d acc[4];
  for (int c = 0; c < 4; ++c) acc[c] = _mm512_setzero_pd();
  for (int64_t i = 0; i < kChunk; i += 8) {
    for (int c = 0; c < 4; ++c) {
      const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + c * kChunk + i));
      acc[c] = _mm512_add_pd(acc[c], _mm512_mul_pd(v, v));  // v * v exact: fused or not, the same bits
    }
  }
  for (int c = 0; c < 4; ++c) {
    alignas(64) double s[8];
    _mm512_store_pd(s, acc[c]);
    sums[c] = detail::pairwise_sum8(s);
  }
}

/// The chunked sum of squares of n floats on AVX-512: the chunks' sums, then added left to right as
/// chunked_sum_of_chunks adds them (the same bits on any number of threads). Where x fits the L3 (the baby
/// GPT's 0.8 M gradients: a step's norm reads them just after the backward wrote them), whole chunks go
/// four at a time; from memory (GPT-2's 124 M), one at a time, since four streams 16 KiB apart measured
/// 0.88x of one on a Zen 4 core.
double sum_squares_float_avx512(const float* x, int64_t n) {
  constexpr int64_t kChunk = detail::kSumChunk;
  const bool in_cache = n * static_cast<int64_t>(sizeof(float)) <= cpu_cache_sizes().l3;
  const int64_t chunks = (n + kChunk - 1) / kChunk, groups = in_cache ? n / kChunk / 4 : 0;
  const bool threads = n >= detail::kElementwiseGrain;
  std::vector<double> parts(static_cast<size_t>(chunks));
#pragma omp parallel for if (threads && groups > 1) schedule(static)
  for (int64_t g = 0; g < groups; ++g) four_chunk_sums_squares_avx512(x + 4 * g * kChunk, &parts[4 * g]);
#pragma omp parallel for if (threads && chunks - 4 * groups > 1) schedule(static)
  for (int64_t k = 4 * groups; k < chunks; ++k) {
    parts[static_cast<size_t>(k)] = chunk_sum_squares_avx512(x, k * kChunk, std::min(n, (k + 1) * kChunk));
  }
  double total = 0.0;
  for (double part : parts) total += part;
  return total;
}
#endif

template <typename T>
double sum_squares_impl(const Tensor& x) {
  const auto* xp = static_cast<const T*>(x.data_ptr());
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = cpu_features().avx512f;
    if (avx512) return sum_squares_float_avx512(xp, x.numel());
  }
#endif
  return detail::chunked_sum_parallel(x.numel(), [xp](int64_t i) {
    const double v = static_cast<double>(xp[i]);
    return v * v;
  });
}

}  // namespace

void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWStep& s) {
  adamw_segments(default_adamw_kernel(DeviceKind::CPU), {AdamWTensors{param, grad, m, v, s}});
}

void adamw_with(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWStep& s) {
  adamw_segments(adamw_kernel_supports(kernel) ? kernel : AdamWKernel::CpuLoop,
                 {AdamWTensors{param, grad, m, v, s}});
}

void adamw_all(const std::vector<AdamWTensors>& tensors) {
  adamw_segments(default_adamw_kernel(DeviceKind::CPU), tensors);
}

double sum_squares(const Tensor& x) {
  double total = 0.0;
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "global_l2_norm", [&] { total = sum_squares_impl<scalar_t>(x); });
  return total;
}

}  // namespace brigade::kernels::cpu
