// The AVX-512 + FMA row loops of layernorm v2 (layernorm_avx512.h says what changes from v1).
//
// Napkin math, one core of this EPYC (~3.5 GHz, Zen 4): a 512-bit instruction takes a 256-bit pipe for two
// cycles, so about one 512-bit FMA-pipe and one add-pipe instruction issue a cycle, and one 512-bit load
// (a store takes two cycles). A row of C = 768 floats is 48 vectors:
//  - forward: two passes, the first from memory: the centred sums (1 load, 3 operations a vector), the
//    output (3 loads, 3 operations, a store). ~4 loads and ~2 store cycles a vector, ~6 cycles: ~300
//    cycles a row, plus ~100 for the row's serial tail (the reductions, a division, a square root).
//    Measured in L1: ~112 ns (~390 cycles) a row alone, ~104 ns four at a time. A row in and out at the
//    ~60 GB/s this core copies a 16 MiB buffer takes ~100 ns, so at GPT-2's rows the forward runs near the
//    copy rate; v1's statistics in double made it ~210 ns.
//  - forward, short rows: at C = 128 (8 vectors, ~35 cycles of loads and stores) the serial tail is most
//    of a row: three reductions (~20 cycles each), a division, a square root. Rows alone measured
//    ~34-53 ns (~120-190 cycles) in L1 (the host's other tenants moved it between runs); four at a time,
//    each phase over all four before the next, ~33 ns, and eight ~24-28 ns: their tails overlap.
//  - backward: per row, the two sums (3 loads, 4 operations a vector); then dx (4 operations, a store)
//    and the parameter gradients' terms (xhat, an FMA, an add), summed in float over a group of four rows
//    and widened into the double totals once a group (4 conversions, 4 double adds and the totals' loads
//    and stores per four rows). Widening every row's terms instead (16 floats of dy and of x in halves: 4
//    conversions, 4 FMAs, 2 adds a vector) measured ~245 ns a row in L1 against ~150 without the parameter
//    gradients; a row in and out takes ~150 ns at the copy rate. v1 took ~470 ns: its sums widened to
//    double too, and its parameter gradients read dy and x again.
//
// Accuracy. The forward's sums are float, ~50 values a lane and then 16 lanes. A plain sum's rounding is
// relative to the mean, which can be far larger than the spread (a mean of 100, a spread of 0.01), so the
// row is summed centred about a guess of its mean (its first 16 elements'), and the mean and the variance
// are corrected from those centred sums; nothing large cancels while the guess is within a spread, and
// the sums are taken again about the corrected mean where it is not. tests/kernels/layernorm_avx512_test.cpp
// measures the statistics and outputs against long double.
// g++ 12 warns "__Y is used uninitialized" (and "may be") inside _mm512_reduce_add_ps (the
// _mm256_undefined_pd operand of its extract, fully overwritten under an all-ones mask): a known false
// positive of its headers, so before the includes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/layernorm_avx512.h"

#include "kernels/cpu/avx512_rows.h"  // BRIGADE_AVX512*, first_lanes, write_row

#if BRIGADE_CPU_X86
#include <algorithm>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>

#endif

// Every fused multiply-add below is written as one: g++ would otherwise fuse a multiply into the add or
// subtract that follows (dy * w - mean_dxhat), and the unrounded product would no longer cancel exactly
// against the same product summed in the first pass.
#pragma GCC optimize("fp-contract=off")

namespace brigade::kernels::cpu::detail {

#if BRIGADE_CPU_X86
namespace {

/// p[j .. j + 16) under mask m (zeros elsewhere), or `fill` in every lane when p is null.
BRIGADE_AVX512_INLINE __m512 load_or(const float* p, int64_t j, __mmask16 m, float fill) {
  return p ? _mm512_maskz_loadu_ps(m, p + j) : _mm512_set1_ps(fill);
}

/// Two float sums over a row: step(j, mask, sum_a, sum_b) adds the 16 lanes from j into them (zeros in
/// the lanes outside the mask). Four sets of accumulators, so that consecutive vectors do not wait on each
/// other's adds (latency 3-4 cycles, two a cycle), totalled lane by lane in float.
template <typename F>
BRIGADE_AVX512_INLINE std::pair<float, float> sum_row_pair(int64_t n, F step) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps();
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), b2 = _mm512_setzero_ps(),
         b3 = _mm512_setzero_ps();
  const __mmask16 all = first_lanes(16);
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    step(j, all, a0, b0);
    step(j + 16, all, a1, b1);
    step(j + 32, all, a2, b2);
    step(j + 48, all, a3, b3);
  }
  for (; j + 16 <= n; j += 16) step(j, all, a0, b0);
  if (j < n) step(j, first_lanes(n - j), a1, b1);
  return {_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))),
          _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3)))};
}

/// dx = fma(x - mean, c_centred, (dy * w - mean_dxhat) * rs) for one row: the backward's formula
/// rs * ((dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat)) with xhat's factor folded into c_centred.
/// dxhat - mean(dxhat) is taken first, as v1 does: where a row's dxhat are all equal (a row of one
/// element, say), it is exactly 0, and the eps-sized variance's huge rs does not magnify a rounding.
struct RowGrad {
  __m512 mean, rs, mean_dxhat, c_centred;
};

/// A row's two sums, sum dxhat and sum dxhat * (x - mean), in float, into its RowGrad.
BRIGADE_AVX512_INLINE RowGrad row_grad(const float* dy, const float* x, const float* w, float mean,
                                       float inv_std, int64_t n) {
  const __m512 m = _mm512_set1_ps(mean);
  // Lanes past the row: dy reads 0, so they add nothing to either sum.
  const auto [sum_g, sum_gd] =
      sum_row_pair(n, [&](int64_t j, __mmask16 k, __m512& g_sum, __m512& gd_sum) BRIGADE_AVX512_LAMBDA {
        const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + j), load_or(w, j, k, 1.0f));
        g_sum = _mm512_add_ps(g_sum, g);
        gd_sum = _mm512_fmadd_ps(g, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m), gd_sum);
      });
  const double count = static_cast<double>(n), rs = static_cast<double>(inv_std);
  const double mean_g = static_cast<double>(sum_g) / count;
  const double mean_gx = rs * static_cast<double>(sum_gd) / count;
  return {m, _mm512_set1_ps(inv_std), _mm512_set1_ps(static_cast<float>(mean_g)),
          _mm512_set1_ps(static_cast<float>(-rs * rs * mean_gx))};
}

/// G consecutive rows from dy, x, dx (row length n): the sums of each row, then one sweep of the columns
/// writing every row's dx and, with kParams, adding the group's rows into pw and pb: the G terms of a
/// column, dy * xhat (xhat = (x - mean) * rs, in float) and dy, are added in float, in row order, and
/// their sum is widened into the double totals. Widening every row instead (v1, and this loop before)
/// cost ~40 % of the sweep in conversions and double adds; a group's float sum rounds at most G - 1 times,
/// so a column's total stays within a few float roundings of the size of its terms, sum |dy * xhat|,
/// however many rows it adds (the op tables check it on that scale).
template <int G, bool kParams>
BRIGADE_AVX512_INLINE void backward_group(const float* dy, const float* x, const float* w, const float* mean,
                                          const float* inv_std, int64_t n, float* dx, double* pw, double* pb,
                                          int64_t rows_ahead) {
  RowGrad rg[G];
  for (int r = 0; r < G; ++r) rg[r] = row_grad(dy + r * n, x + r * n, w, mean[r], inv_std[r], n);
  auto columns = [&](int64_t j, __mmask16 k) BRIGADE_AVX512_LAMBDA {
    // The next group's rows of dy and x, a line each, while this sweep works from L1: the row sums that
    // start the next group then find them in cache.
    for (int64_t r = 0; r < rows_ahead; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(dy + (G + r) * n + j), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(x + (G + r) * n + j), _MM_HINT_T0);
    }
    const __m512 wv = load_or(w, j, k, 1.0f);
    // The tail's double lanes: the low 8 of k, then the high 8.
    const auto k_lo = static_cast<__mmask8>(k & 0xff), k_hi = static_cast<__mmask8>(k >> 8);
    // The group's parameter-gradient terms of these 16 columns, added in float (masked lanes add 0).
    __m512 group_w = _mm512_setzero_ps(), group_b = _mm512_setzero_ps();
    for (int r = 0; r < G; ++r) {
      const RowGrad& c = rg[r];
      const __m512 xv = _mm512_maskz_loadu_ps(k, x + r * n + j),
                   dyv = _mm512_maskz_loadu_ps(k, dy + r * n + j);
      const __m512 d = _mm512_sub_ps(xv, c.mean);
      const __m512 dxhat = _mm512_mul_ps(dyv, wv);
      _mm512_mask_storeu_ps(
          dx + r * n + j, k,
          _mm512_fmadd_ps(d, c.c_centred, _mm512_mul_ps(_mm512_sub_ps(dxhat, c.mean_dxhat), c.rs)));
      if constexpr (kParams) {
        group_w = _mm512_fmadd_ps(dyv, _mm512_mul_ps(d, c.rs), group_w);
        group_b = _mm512_add_ps(group_b, dyv);
      }
    }
    if constexpr (kParams) {
      // totals[j .. j + 16) += v, widened.
      auto add_into = [&](double* totals, __m512 v) BRIGADE_AVX512_LAMBDA {
        const Wide w = widen(v);
        _mm512_mask_storeu_pd(totals + j, k_lo, _mm512_add_pd(_mm512_maskz_loadu_pd(k_lo, totals + j), w.lo));
        _mm512_mask_storeu_pd(totals + j + 8, k_hi,
                              _mm512_add_pd(_mm512_maskz_loadu_pd(k_hi, totals + j + 8), w.hi));
      };
      add_into(pw, group_w);
      add_into(pb, group_b);
    }
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) columns(j, first_lanes(16));
  if (j < n) columns(j, first_lanes(n - j));
}

/// The sums of c = x - first and c^2 over a row, about a guess `first` of its mean.
BRIGADE_AVX512_INLINE std::pair<float, float> centred_sums(const float* x, int64_t n, float first_f) {
  const __m512 first = _mm512_set1_ps(first_f);
  return sum_row_pair(n, [&](int64_t j, __mmask16 k, __m512& c_sum, __m512& cc_sum) BRIGADE_AVX512_LAMBDA {
    const __m512 c = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + j), first);
    c_sum = _mm512_add_ps(c_sum, c);
    cc_sum = _mm512_fmadd_ps(c, c, cc_sum);
  });
}

/// A row's mean and variance (plus eps) from its centred sums. The mean is first + mean(c), and the squares
/// about it are sum c^2 - (sum c)^2 / n (the corrected two-pass algorithm). Their rounding is relative to
/// sum c^2 = squares + n (first - mean)^2: within a few float roundings while the guess is within a spread
/// of the mean. Where it is further off (outlying first columns), the sums are taken again about the
/// corrected mean.
struct RowStats {
  double mu, var_eps;
};

BRIGADE_AVX512_INLINE RowStats row_stats(const float* x, int64_t n, double eps, float first_f,
                                         std::pair<float, float> sums) {
  const double count = static_cast<double>(n), per_element = 1.0 / count;
  auto [sum_c, sum_cc] = sums;
  double offset = static_cast<double>(sum_c) * per_element;  // mean - first
  if (offset * offset * count > static_cast<double>(sum_cc) - offset * sum_c) {
    first_f = static_cast<float>(static_cast<double>(first_f) + offset);
    std::tie(sum_c, sum_cc) = centred_sums(x, n, first_f);
    offset = static_cast<double>(sum_c) * per_element;
  }
  const double squares = static_cast<double>(sum_cc) - offset * static_cast<double>(sum_c);
  return {static_cast<double>(first_f) + offset, (squares > 0.0 ? squares : 0.0) * per_element + eps};
}

/// 1 / sqrt(v) for G values: one packed square root and one packed division for four rows, where a
/// row at a time would hold the divider for two of each (~30 cycles a row at n = 128, as much as its
/// vectors). Correctly rounded either way, so the bits do not depend on G.
template <int G>
BRIGADE_AVX512_INLINE void inverse_sqrts(const double* v, double* out) {
  int r = 0;
  for (; r + 4 <= G; r += 4) {
    _mm256_storeu_pd(out + r, _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(_mm256_loadu_pd(v + r))));
  }
  for (; r < G; ++r) out[r] = 1.0 / std::sqrt(v[r]);
}

/// The mean and 1/std of G consecutive rows of x (row length n), phase by phase: every row's guess of its
/// mean (the mean of its first 16 elements), then every row's sums, then the statistics. One row's phases
/// are a chain (~150 cycles: three reductions, a division, a square root) against ~10 vectors of work at
/// n = 128; side by side the rows' chains overlap. Each row's arithmetic is the same whatever G, so the
/// bits are too.
template <int G>
struct GroupStats {
  double mu[G], inv_std[G];
};

template <int G>
BRIGADE_AVX512_INLINE GroupStats<G> group_stats(const float* x, int64_t n, double eps) {
  const int64_t head = std::min<int64_t>(n, 16);
  const float per_head = 1.0f / static_cast<float>(head);
  float first[G];
  for (int r = 0; r < G; ++r) {
    first[r] = _mm512_reduce_add_ps(_mm512_maskz_loadu_ps(first_lanes(head), x + r * n)) * per_head;
  }
  std::pair<float, float> sums[G];
  for (int r = 0; r < G; ++r) sums[r] = centred_sums(x + r * n, n, first[r]);
  GroupStats<G> out;
  double var_eps[G];
  for (int r = 0; r < G; ++r) {
    const RowStats st = row_stats(x + r * n, n, eps, first[r], sums[r]);
    out.mu[r] = st.mu;
    var_eps[r] = st.var_eps;
  }
  inverse_sqrts<G>(var_eps, out.inv_std);
  return out;
}

/// y = (x - mu) * inv_std * w + b for G consecutive rows, and their statistics stored; `ahead` (may be
/// null): G rows to prefetch into L1 meanwhile.
template <int G>
BRIGADE_AVX512_INLINE void write_group(const float* x, float* y, int64_t n, const float* w, const float* b,
                                       const GroupStats<G>& st, double* mu_out, double* inv_std_out,
                                       const float* ahead) {
  for (int r = 0; r < G; ++r) {
    // y = ((x - hi) - lo) * rs * w + b, with mu = hi + lo (hi a float): (x - hi) * rs + (-lo * rs) is one
    // FMA, and x - hi is exact near the mean.
    const double mu = st.mu[r], rs_d = st.inv_std[r];
    const float hi_f = static_cast<float>(mu);
    const __m512 hi = _mm512_set1_ps(hi_f);
    const __m512 rs = _mm512_set1_ps(static_cast<float>(rs_d));
    const __m512 minus_lo_rs = _mm512_set1_ps(static_cast<float>(-(mu - static_cast<double>(hi_f)) * rs_d));
    const float* row = x + r * n;
    const float* next = ahead != nullptr ? ahead + r * n : nullptr;
    write_row(y + r * n, n, false, [&](int64_t j, __mmask16 k) BRIGADE_AVX512_LAMBDA {
      if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next + j), _MM_HINT_T0);
      const __m512 xhat =
          _mm512_fmadd_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), hi), rs, minus_lo_rs);
      return _mm512_fmadd_ps(xhat, load_or(w, j, k, 1.0f), load_or(b, j, k, 0.0f));
    });
    mu_out[r] = mu;
    inv_std_out[r] = rs_d;
  }
}

template <bool kParams>
BRIGADE_AVX512_INLINE void backward_rows(const float* dy, const float* x, const float* w, const float* mean,
                                         const float* inv_std, int64_t rows, int64_t n, float* dx, double* pw,
                                         double* pb) {
  constexpr int kGroup = 4;
  int64_t r = 0;
  for (; r + kGroup <= rows; r += kGroup) {
    const int64_t ahead = std::min<int64_t>(kGroup, rows - r - kGroup);
    backward_group<kGroup, kParams>(dy + r * n, x + r * n, w, mean + r, inv_std + r, n, dx + r * n, pw, pb,
                                    ahead);
  }
  for (; r < rows; ++r) {
    backward_group<1, kParams>(dy + r * n, x + r * n, w, mean + r, inv_std + r, n, dx + r * n, pw, pb,
                               r + 1 < rows ? 1 : 0);
  }
}

}  // namespace

BRIGADE_AVX512 void layernorm_forward_rows_avx512(const float* x, float* y, int64_t rows, int64_t n,
                                                  const float* w, const float* b, double eps, double* mu,
                                                  double* inv_std) {
  // A group's statistics, then its outputs; while a group is written, the next is prefetched. Short rows
  // go eight at a time (their chains are long against their vectors), long rows four (the file comment
  // has the measurements; at n = 768, eight was slower than four). Issuing the next group's statistics before
  // this group's outputs (software pipelining) measured no faster.
  auto run = [&](auto group_size) BRIGADE_AVX512_LAMBDA {
    constexpr int G = decltype(group_size)::value;
    int64_t r = 0;
    for (; r + G <= rows; r += G) {
      const float* ahead = r + 2 * G <= rows ? x + (r + G) * n : nullptr;
      write_group<G>(x + r * n, y + r * n, n, w, b, group_stats<G>(x + r * n, n, eps), mu + r, inv_std + r,
                     ahead);
    }
    for (; r < rows; ++r) {
      write_group<1>(x + r * n, y + r * n, n, w, b, group_stats<1>(x + r * n, n, eps), mu + r, inv_std + r,
                     r + 1 < rows ? x + (r + 1) * n : nullptr);
    }
  };
  if (n <= 256) return run(std::integral_constant<int, 8>{});
  run(std::integral_constant<int, 4>{});
}

BRIGADE_AVX512 void layernorm_backward_rows_avx512(const float* dy, const float* x, const float* w,
                                                   const float* mean, const float* inv_std, int64_t rows,
                                                   int64_t n, float* dx, double* pw, double* pb) {
  if (pw != nullptr && pb != nullptr)
    return backward_rows<true>(dy, x, w, mean, inv_std, rows, n, dx, pw, pb);
  backward_rows<false>(dy, x, w, mean, inv_std, rows, n, dx, nullptr, nullptr);
}

#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
