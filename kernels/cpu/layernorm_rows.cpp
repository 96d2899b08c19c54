// The row loops of layernorm_rows.h, compiled for AVX-512, AVX2 and SSE2 (the bits agree: see the header).
//
// Napkin math (one core of this EPYC, ~3.7 GHz, a row of C = 768 floats in L1): the forward reads the row
// twice. The statistics widen each 16-float vector to two 8-double registers and add d and d^2 (~10
// operations per 16 elements); the normalisation is ~6 float operations per 16. ~16 operations per 16
// elements, ~800 per row: ~110 ns at two a cycle, plus the row's serial tail (two 16-lane totals, a
// division, a square root: ~40 ns). Measured (a loop over 1024 rows in L2): ~230 ns per row forward,
// ~550 backward with the parameter gradients (the three-pass loops before: ~340 and ~730; the scalar double
// loops before those: ~820 and ~1300). A row in and out from DRAM at the ~28 GB/s one core streams takes
// ~220 ns, so at GPT-2 shapes the forward runs at about memory speed. At C = 128 a row takes ~60 ns, the
// serial tail most of it.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/layernorm_rows.h"

#include <cstring>
#include <utility>

#include "kernels/cpu/row_vectors.h"
#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

namespace {

/// p[k .. k + lanes) (zeros past n), or `fill` in every lane when p is null.
template <typename V>
BRIGADE_VECTOR_INLINE V load_or(const float* p, int64_t k, int64_t n, float fill) {
  return p ? load_padded<V>(p, k, n) : V{} + fill;
}

/// v with the lanes of elements at n and past set to 0 (a sum's padding), through a multiply by 1 or 0: a
/// lane written at a variable index would keep v in memory, and the running sums with it.
template <typename V>
BRIGADE_VECTOR_INLINE wide_t<V> zero_past(const wide_t<V>& v, int64_t k, int64_t n) {
  if (k + kLanes<V> <= n) return v;
  static constexpr float kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  return v * widen(load_part<V>(kOnes, n > k ? n - k : 0, 0.0f));
}

/// The doubles p[0 .. lanes) as V's wide vector, and back.
template <typename V>
BRIGADE_VECTOR_INLINE wide_t<V> load_wide(const double* p) {
  wide_t<V> w;
  std::memcpy(&w.lo, p, sizeof w.lo);
  std::memcpy(&w.hi, p + wide_t<V>::kHalf, sizeof w.hi);
  return w;
}

template <typename V>
BRIGADE_VECTOR_INLINE void store_wide(double* p, const wide_t<V>& w) {
  std::memcpy(p, &w.lo, sizeof w.lo);
  std::memcpy(p + wide_t<V>::kHalf, &w.hi, sizeof w.hi);
}

/// out[k .. k + lanes) = f(k) for the vectors of a row of n floats; the tail stores only its n - k lanes.
template <typename V, typename F>
BRIGADE_VECTOR_INLINE void write_row(float* out, int64_t n, F f) {
  int64_t k = 0;
  for (; k + kLanes<V> <= n; k += kLanes<V>) store_v(out + k, f(k));
  if (k < n) store_part(out + k, f(k), n - k);
}

/// The mean as two floats, hi = mu rounded and lo = the rest, so that (x - hi) - lo in float is x - mu to
/// about one rounding: x - hi is exact where x is near the mean (Sterbenz), which is where it matters.
struct SplitMean {
  float hi, lo;
  explicit SplitMean(double mu)
      : hi(static_cast<float>(mu)),
        lo(static_cast<float>(mu - static_cast<double>(static_cast<float>(mu)))) {}
};

template <typename V>
BRIGADE_VECTOR_INLINE V centred(const float* x, int64_t k, int64_t n, SplitMean m) {
  return (load_padded<V>(x, k, n) - m.hi) - m.lo;
}

/// The row's mean and its sum of squared deviations in one pass: sums of d = x - s and of d^2 in double,
/// shifted by the row's first element s. Then sum (x - mean)^2 = sum d^2 - (sum d)^2 / n, and the
/// cancellation in that difference is bounded: the row holds s, so n var >= (s - mean)^2, and the relative
/// error is at most about (1 + n) double roundings (below 1e-10 for rows under a million). Two passes (the
/// mean, then the centred squares) read the row once more for no accuracy a float output can show.
template <typename V>
BRIGADE_VECTOR_INLINE std::pair<double, double> mean_and_squares(const float* x, int64_t n) {
  const double s = static_cast<double>(x[0]);
  const auto [sum_d, sum_dd] =
      sum_row_pair<V>(n, [&](int64_t k, wide_t<V>& d_sum, wide_t<V>& dd_sum) BRIGADE_LAMBDA_INLINE {
        const wide_t<V> d = zero_past<V>(widen(load_padded<V>(x, k, n)) - s, k, n);
        d_sum += d;
        dd_sum += d * d;
      });
  const double count = static_cast<double>(n);
  const double squares = sum_dd - sum_d * (sum_d / count);
  return {s + sum_d / count, squares > 0.0 ? squares : 0.0};
}

template <typename V>
BRIGADE_VECTOR_INLINE void forward_body(const float* x, float* y, int64_t n, const float* w, const float* b,
                                        double eps, double* mu_out, double* inv_std_out) {
  const auto [mu, squares] = mean_and_squares<V>(x, n);
  const double inv_std = layernorm_inv_std(squares, n, eps);
  const SplitMean m(mu);
  const float rs = static_cast<float>(inv_std);
  write_row<V>(y, n, [&](int64_t k) BRIGADE_LAMBDA_INLINE {
    return (centred<V>(x, k, n, m) * rs) * load_or<V>(w, k, n, 1.0f) + load_or<V>(b, k, n, 0.0f);
  });
  *mu_out = mu;
  *inv_std_out = inv_std;
}

template <typename V>
BRIGADE_VECTOR_INLINE void backward_body(const float* dy, const float* x, const float* w, double mu,
                                         double inv_std, float* dx, int64_t n) {
  const SplitMean m(mu);
  const float rs = static_cast<float>(inv_std);
  // dy's padding is 0, so the padded lanes of dxhat, and of dxhat * xhat, add nothing.
  auto dxhat = [&](int64_t k)
                   BRIGADE_LAMBDA_INLINE { return load_padded<V>(dy, k, n) * load_or<V>(w, k, n, 1.0f); };
  auto xhat = [&](int64_t k) BRIGADE_LAMBDA_INLINE { return centred<V>(x, k, n, m) * rs; };
  const auto [sum_dxhat, sum_dxhat_xhat] =
      sum_row_pair<V>(n, [&](int64_t k, wide_t<V>& g_sum, wide_t<V>& gx_sum) BRIGADE_LAMBDA_INLINE {
        const wide_t<V> g = widen(dxhat(k));
        g_sum += g;
        gx_sum += g * widen(xhat(k));
      });
  const double count = static_cast<double>(n);
  const float mean_dxhat = static_cast<float>(sum_dxhat / count);
  const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / count);
  write_row<V>(dx, n, [&](int64_t k) BRIGADE_LAMBDA_INLINE {
    return rs * ((dxhat(k) - mean_dxhat) - xhat(k) * mean_dxhat_xhat);
  });
}

/// Column by column, all the block's rows in order, so that a column's two running sums stay in registers
/// from the first row to the last (one load and one store of them per block, not per row); each column
/// still adds its rows in row order.
template <typename V>
BRIGADE_VECTOR_INLINE void param_grads_body(const float* dy, const float* x, const float* mean,
                                            const float* inv_std, int64_t rows, double* pw, double* pb,
                                            int64_t n) {
  using W = wide_t<V>;
  int64_t k = 0;
  for (; k + kLanes<V> <= n; k += kLanes<V>) {
    W acc_w = load_wide<V>(pw + k), acc_b = load_wide<V>(pb + k);
    for (int64_t r = 0; r < rows; ++r) {
      const W g = widen(load_v<V>(dy + r * n + k));
      acc_w += (g * (widen(load_v<V>(x + r * n + k)) - static_cast<double>(mean[r]))) *
               static_cast<double>(inv_std[r]);
      acc_b += g;
    }
    store_wide<V>(pw + k, acc_w);
    store_wide<V>(pb + k, acc_b);
  }
  for (; k < n; ++k) {  // the same operations, one lane at a time
    for (int64_t r = 0; r < rows; ++r) {
      const double g = static_cast<double>(dy[r * n + k]);
      pw[k] += (g * (static_cast<double>(x[r * n + k]) - static_cast<double>(mean[r]))) *
               static_cast<double>(inv_std[r]);
      pb[k] += g;
    }
  }
}

// One set of wrappers per ISA: the same bodies under a target attribute. fp-contract=off keeps g++ from
// fusing a multiply and an add where the target has FMA (AVX-512 implies it), which would change the bits.
#define BRIGADE_LAYERNORM_ROW_KERNELS(NAME, V, ATTRIBUTES)                                            \
  ATTRIBUTES void NAME##_forward(const float* x, float* y, int64_t n, const float* w, const float* b, \
                                 double eps, double* mu, double* inv_std) {                           \
    forward_body<V>(x, y, n, w, b, eps, mu, inv_std);                                                 \
  }                                                                                                   \
  ATTRIBUTES void NAME##_backward(const float* dy, const float* x, const float* w, double mu,         \
                                  double inv_std, float* dx, int64_t n) {                             \
    backward_body<V>(dy, x, w, mu, inv_std, dx, n);                                                   \
  }                                                                                                   \
  ATTRIBUTES void NAME##_param_grads(const float* dy, const float* x, const float* mean,              \
                                     const float* inv_std, int64_t rows, double* pw, double* pb,      \
                                     int64_t n) {                                                     \
    param_grads_body<V>(dy, x, mean, inv_std, rows, pw, pb, n);                                       \
  }                                                                                                   \
  const LayernormRowKernels NAME##_kernels = {NAME##_forward, NAME##_backward, NAME##_param_grads};

BRIGADE_LAYERNORM_ROW_KERNELS(sse2, f32x4, __attribute__((optimize("fp-contract=off"))))
#if BRIGADE_CPU_AVX2
BRIGADE_LAYERNORM_ROW_KERNELS(avx2, f32x8, __attribute__((target("avx2"), optimize("fp-contract=off"))))
BRIGADE_LAYERNORM_ROW_KERNELS(avx512, f32x16, __attribute__((target("avx512f"), optimize("fp-contract=off"))))
#endif
#undef BRIGADE_LAYERNORM_ROW_KERNELS

}  // namespace

const LayernormRowKernels& layernorm_row_kernels(VectorIsa isa) {
#if BRIGADE_CPU_AVX2
  if (isa == VectorIsa::Avx512) return avx512_kernels;
  if (isa == VectorIsa::Avx2) return avx2_kernels;
#endif
  (void)isa;
  return sse2_kernels;
}

const LayernormRowKernels& layernorm_row_kernels() {
  return layernorm_row_kernels(widest_vector_isa());
}

}  // namespace brigade::kernels::cpu::detail
