// The AVX-512 + FMA row loops of softmax and cross-entropy v2 (exp_rows_avx512.h says what changes from
// v1).
//
// Napkin math, one core of this EPYC (Zen 4, two 512-bit vector FP instructions a cycle; ~28 GB/s
// single-core read stream). Every exp here has an argument of at most 0 (x - max, or a log-probability),
// or at most 16 (x - shift in a long row's single pass), so the rows call exp16_not_above_88: exp16's bits
// without the instructions that handle arguments above 88. With the subtraction, the clamp and its share
// of the sum, a vector of 16 exps is ~15 instructions: measured ~3.5 ns in L1, 4.6 G exps per second. A
// pass over a row reads 4 bytes per element: at 28 GB/s that is 7 G elements per second, so the exp binds,
// not the read, and a long row's single pass (max_exp_sum) runs at the exp's rate with the row streaming
// under it: cross-entropy without the gradient at GPT-2's 1024 x 50257 logits, 51.5 M exps, ~11 ms.
// softmax forward: 1 read for the sums + 1 read and 1 write for the output = 12 bytes an element
// (v1: 20). Cross-entropy without the gradient: 4 bytes (v1: 12, it stored the exps in a scratch row).
// g++ 12 warns "__Y is (or may be) used uninitialized" inside _mm512_max_ps, _mm512_cvtps_pd and the
// reductions (their _mm512_undefined_* pass-through operand, fully overwritten under an all-ones mask): a
// known false positive of its headers. Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/exp_rows_avx512.h"

#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/log_avx512.h"

#if BRIGADE_CPU_X86
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#endif

namespace brigade::kernels::cpu::detail {

bool avx512_rows_run() {
#if BRIGADE_CPU_X86
  return cpu_features().avx512f && cpu_features().fma;
#else
  return false;
#endif
}

bool output_outgrows_caches(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float)) > 2 * cpu_cache_sizes().l3;
}

#if BRIGADE_CPU_X86
namespace {

/// max of x[0, n), four accumulators; masked-off lanes of the tail read -inf.
BRIGADE_AVX512_INLINE float chunk_max(const float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = minus_inf, m1 = minus_inf, m2 = minus_inf, m3 = minus_inf;
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + j + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + j + 48));
  }
  for (; j + 16 <= n; j += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
  if (j < n) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(minus_inf, first_lanes(n - j), x + j));
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

/// sum_j exp(x[j] - shift) over x[0, n) in double: 64 exps added in float, then widened into 16 double
/// lanes. With kStore, each exp is also written to out[j].
template <bool kStore = false>
BRIGADE_AVX512_INLINE double chunk_exp_sum(const float* x, int64_t n, float shift, float* out = nullptr) {
  const __m512 s = _mm512_set1_ps(shift);
  Wide sum{_mm512_setzero_pd(), _mm512_setzero_pd()};
  auto add = [&](__m512 v) BRIGADE_AVX512_LAMBDA { add_widened(sum, v); };
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    const __m512 e0 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
    const __m512 e1 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), s));
    const __m512 e2 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(x + j + 32), s));
    const __m512 e3 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(x + j + 48), s));
    if constexpr (kStore) {
      _mm512_storeu_ps(out + j, e0);
      _mm512_storeu_ps(out + j + 16, e1);
      _mm512_storeu_ps(out + j + 32, e2);
      _mm512_storeu_ps(out + j + 48, e3);
    }
    add(_mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3)));
  }
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
    if constexpr (kStore) _mm512_storeu_ps(out + j, e);
    add(e);
  }
  if (j < n) {
    const __mmask16 m = first_lanes(n - j);
    const __m512 e = exp16_not_above_88(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s));
    if constexpr (kStore) _mm512_mask_storeu_ps(out + j, m, e);
    add(_mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum.lo, sum.hi));
}

/// The totals of four rows' vectors of 8 double lanes, each in _mm512_reduce_add_pd's order (lanes i and
/// i + 4 added, then j and j + 2, then 0 and 1: the bits of a row alone), the four reductions side by side:
/// 7 shuffles and 4 adds where one at a time takes 4 x 6 dependent steps.
BRIGADE_AVX512_INLINE void reduce_four(__m512d v0, __m512d v1, __m512d v2, __m512d v3, double* totals) {
  // [row a's lanes 0-3 + 4-7 | row b's]: the halves of two rows gathered, then added.
  const __m512d s01 = _mm512_add_pd(_mm512_shuffle_f64x2(v0, v1, 0x44), _mm512_shuffle_f64x2(v0, v1, 0xee));
  const __m512d s23 = _mm512_add_pd(_mm512_shuffle_f64x2(v2, v3, 0x44), _mm512_shuffle_f64x2(v2, v3, 0xee));
  // [row 0's lanes 0-1 + 2-3 | row 1's | row 2's | row 3's].
  const __m512d t = _mm512_add_pd(_mm512_shuffle_f64x2(s01, s23, 0x88), _mm512_shuffle_f64x2(s01, s23, 0xdd));
  // Each pair's two lanes added: a row's total in the even lane.
  alignas(64) double out[8];
  _mm512_store_pd(out, _mm512_add_pd(t, _mm512_permute_pd(t, 0x55)));
  for (int r = 0; r < 4; ++r) totals[r] = out[2 * r];
}

/// chunk_exp_sum of four rows side by side (row i at x + i * n, shifted by shift[i], its exps written to
/// out + i * n with kStore), each row's total the same bits. One row alone is a chain: its exps feed one
/// running sum, which ends in a reduction. Four rows' vectors interleaved give the core four chains to
/// overlap, and their four reductions go side by side (reduce_four).
template <bool kStore>
BRIGADE_AVX512_INLINE void four_exp_sums(const float* x, int64_t n, const float* shift, double* totals,
                                         float* out) {
  __m512 s[4];
  Wide sum[4];
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm512_set1_ps(shift[i]);
    sum[i] = Wide{_mm512_setzero_pd(), _mm512_setzero_pd()};
  }
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    for (int i = 0; i < 4; ++i) {
      const float* row = x + i * n + j;
      const __m512 e0 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row), s[i]));
      const __m512 e1 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row + 16), s[i]));
      const __m512 e2 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row + 32), s[i]));
      const __m512 e3 = exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row + 48), s[i]));
      if constexpr (kStore) {
        float* y = out + i * n + j;
        _mm512_storeu_ps(y, e0);
        _mm512_storeu_ps(y + 16, e1);
        _mm512_storeu_ps(y + 32, e2);
        _mm512_storeu_ps(y + 48, e3);
      }
      add_widened(sum[i], _mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3)));
    }
  }
  for (; j < n; j += 16) {  // the last vectors, the very last one masked (its lanes past n add 0)
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - j));
    for (int i = 0; i < 4; ++i) {
      const __m512 e = exp16_not_above_88(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i * n + j), s[i]));
      if constexpr (kStore) _mm512_mask_storeu_ps(out + i * n + j, m, e);
      add_widened(sum[i], _mm512_maskz_mov_ps(m, e));
    }
  }
  reduce_four(_mm512_add_pd(sum[0].lo, sum[0].hi), _mm512_add_pd(sum[1].lo, sum[1].hi),
              _mm512_add_pd(sum[2].lo, sum[2].hi), _mm512_add_pd(sum[3].lo, sum[3].hi), totals);
}

/// How far above the shift an element may lie before the shift is raised: its exp is then at most e^16,
/// and a sum of a row's exps stays far inside double's range.
constexpr float kShiftSlack = 16.0f;

/// max_exp_sum for a row longer than a chunk, in one pass: sum_j exp(x[j] - shift) with a shift that is
/// the max of the first 64 elements, raised (the sum so far rescaled in double) only when an element
/// passes it by more than kShiftSlack, which real rows of logits or scores almost never do after their
/// start. The per-element work is then a load, a lane-wise max (for the row's max) and the exp, with no
/// second read of the row; the exp binds (~6 cycles per 16 lanes), and the row streams under it. At the
/// end the sum is moved from the shift to the row's max by one exp in double.
BRIGADE_AVX512_INLINE double long_row_exp_sum(const float* x, int64_t n, float* max) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // A first block of -inf only (a masked start) gives the lowest finite shift: the -inf elements add
  // exp(-inf) = 0, and the first finite element raises it.
  float shift = std::max(chunk_max(x, 64), std::numeric_limits<float>::lowest());
  __m512 m = minus_inf, s = _mm512_set1_ps(shift), limit = _mm512_set1_ps(shift + kShiftSlack);
  Wide sum{_mm512_setzero_pd(), _mm512_setzero_pd()};
  // Takes the block's max into the running max, and raises the shift to the running max when the block
  // passes the limit.
  auto see = [&](__m512 block_max) BRIGADE_AVX512_LAMBDA {
    m = _mm512_max_ps(m, block_max);
    if (__builtin_expect(_mm512_cmp_ps_mask(block_max, limit, _CMP_GT_OQ) != 0, 0)) {
      const float raised = _mm512_reduce_max_ps(m);
      const __m512d factor =
          _mm512_set1_pd(std::exp(static_cast<double>(shift) - static_cast<double>(raised)));
      sum.lo = _mm512_mul_pd(sum.lo, factor);
      sum.hi = _mm512_mul_pd(sum.hi, factor);
      shift = raised;
      s = _mm512_set1_ps(shift);
      limit = _mm512_set1_ps(shift + kShiftSlack);
    }
  };
  auto add = [&](__m512 v) BRIGADE_AVX512_LAMBDA { add_widened(sum, v); };
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    const __m512 v0 = _mm512_loadu_ps(x + j), v1 = _mm512_loadu_ps(x + j + 16);
    const __m512 v2 = _mm512_loadu_ps(x + j + 32), v3 = _mm512_loadu_ps(x + j + 48);
    see(_mm512_max_ps(_mm512_max_ps(v0, v1), _mm512_max_ps(v2, v3)));
    const __m512 e0 = exp16_not_above_88(_mm512_sub_ps(v0, s));
    const __m512 e1 = exp16_not_above_88(_mm512_sub_ps(v1, s));
    const __m512 e2 = exp16_not_above_88(_mm512_sub_ps(v2, s));
    const __m512 e3 = exp16_not_above_88(_mm512_sub_ps(v3, s));
    add(_mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3)));
  }
  for (; j < n; j += 16) {  // the last vectors, the very last one masked (its missing lanes read -inf)
    const __m512 v = _mm512_mask_loadu_ps(minus_inf, first_lanes(std::min<int64_t>(16, n - j)), x + j);
    see(v);
    add(exp16_not_above_88(_mm512_sub_ps(v, s)));
  }
  *max = _mm512_reduce_max_ps(m);
  if (*max == -std::numeric_limits<float>::infinity()) return 0.0;  // -inf only: nothing to add
  const double total = _mm512_reduce_add_pd(_mm512_add_pd(sum.lo, sum.hi));
  return *max == shift ? total : total * std::exp(static_cast<double>(shift) - static_cast<double>(*max));
}

}  // namespace

BRIGADE_AVX512 double max_exp_sum_avx512(const float* x, int64_t n, float* max) {
  // A row that fits a chunk: its max, then its exps from L1 (max_exp_sum_rows_avx512 gives the same bits).
  if (n > kExpChunk) return long_row_exp_sum(x, n, max);
  double total = 0.0;
  max_exp_sum_rows_avx512(x, 1, n, max, &total, nullptr);
  return total;
}

BRIGADE_AVX512 void max_exp_sum_rows_avx512(const float* x, int64_t rows, int64_t n, float* max,
                                            double* total, float* y) {
  // Phase by phase over a group of rows: each row's max, then their sums, four rows side by side. A short
  // row's work is a chain (the max's reduction feeds every exp; the sum's reduction ends it) longer than
  // its few vectors take to issue; the group's chains overlap.
  constexpr int64_t kGroup = 4;
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int64_t group = std::min(kGroup, rows - r0);
    for (int64_t r = r0; r < r0 + group; ++r) max[r] = chunk_max(x + r * n, n);
    const bool finite = std::all_of(max + r0, max + r0 + group,
                                    [](float m) { return m != -std::numeric_limits<float>::infinity(); });
    if (group == kGroup && finite) {  // four rows side by side
      if (y != nullptr) {
        four_exp_sums<true>(x + r0 * n, n, max + r0, total + r0, y + r0 * n);
      } else {
        four_exp_sums<false>(x + r0 * n, n, max + r0, total + r0, nullptr);
      }
      continue;
    }
    for (int64_t r = r0; r < r0 + group; ++r) {
      // As max_exp_sum_avx512: a row of -inf only sums to 0 (and, storing, writes nothing).
      if (max[r] == -std::numeric_limits<float>::infinity()) {
        total[r] = 0.0;
      } else if (y != nullptr) {
        total[r] = chunk_exp_sum<true>(x + r * n, n, max[r], y + r * n);
      } else {
        total[r] = chunk_exp_sum(x + r * n, n, max[r]);
      }
    }
  }
}

BRIGADE_AVX512 double max_exp_sum_store_avx512(const float* x, float* y, int64_t n, float* max) {
  double total = 0.0;
  max_exp_sum_rows_avx512(x, 1, n, max, &total, y);
  return total;
}

BRIGADE_AVX512 void scale_avx512(float* y, int64_t n, float scale) {
  const __m512 c = _mm512_set1_ps(scale);
  write_row(y, n, false, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
    return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), c);
  });
}

BRIGADE_AVX512 void exp_scaled_avx512(const float* x, float* y, int64_t n, float shift, float scale,
                                      bool stream) {
  const __m512 s = _mm512_set1_ps(shift), c = _mm512_set1_ps(scale);
  write_row(y, n, stream, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
    return _mm512_mul_ps(exp16_not_above_88(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s)), c);
  });
}

BRIGADE_AVX512 void exps_scaled_avx512(const float* x, float* y, int64_t n, float max, float scale, bool kept,
                                       bool stream) {
  if (kept && max != -std::numeric_limits<float>::infinity()) {
    scale_avx512(y, n, scale);
  } else {
    exp_scaled_avx512(x, y, n, max, scale, stream);
  }
}

BRIGADE_AVX512 void log_softmax_avx512(const float* x, float* y, int64_t n, float max, float log_total,
                                       bool stream) {
  const __m512 s = _mm512_set1_ps(max), l = _mm512_set1_ps(log_total);
  write_row(y, n, stream, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
    return _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s), l);
  });
}

BRIGADE_AVX512 void log_softmax_backward_avx512(const float* dy, const float* y, float* dx, int64_t n,
                                                float dy_total) {
  const __m512 t = _mm512_set1_ps(dy_total);
  write_row(dx, n, false, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
    return _mm512_fnmadd_ps(exp16_not_above_88(_mm512_maskz_loadu_ps(m, y + j)), t,
                            _mm512_maskz_loadu_ps(m, dy + j));
  });
}

namespace {

/// sum_j a[j] (b null) or sum_j a[j] b[j] in double, as v1's sums, left in 8 lanes (a row's total is their
/// _mm512_reduce_add_pd): every float widened, so that a product of two floats is exact; two sets of
/// accumulators, so that consecutive vectors do not wait on each other.
BRIGADE_AVX512_INLINE __m512d lanes_in_double(const float* a, const float* b, int64_t n) {
  // Two sets of accumulators, even and odd vectors, each as two halves of 8 doubles. Named, not an array
  // indexed by the vector's parity: g++ kept such an array in memory, a store and a reload every vector.
  __m512d even_lo = _mm512_setzero_pd(), even_hi = _mm512_setzero_pd();
  __m512d odd_lo = _mm512_setzero_pd(), odd_hi = _mm512_setzero_pd();
  auto add = [&](int64_t j, __m512d& lo, __m512d& hi) BRIGADE_AVX512_LAMBDA {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - j));
    const auto [a_lo, a_hi] = load_wide(a, j, m);
    if (b == nullptr) {
      lo = _mm512_add_pd(lo, a_lo);
      hi = _mm512_add_pd(hi, a_hi);
    } else {
      const auto [b_lo, b_hi] = load_wide(b, j, m);
      lo = _mm512_fmadd_pd(a_lo, b_lo, lo);
      hi = _mm512_fmadd_pd(a_hi, b_hi, hi);
    }
  };
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    add(j, even_lo, even_hi);
    add(j + 16, odd_lo, odd_hi);
  }
  if (j < n) add(j, even_lo, even_hi);
  if (j + 16 < n) add(j + 16, odd_lo, odd_hi);
  return _mm512_add_pd(_mm512_add_pd(even_lo, even_hi), _mm512_add_pd(odd_lo, odd_hi));
}

}  // namespace

BRIGADE_AVX512 void softmax_backward_rows_avx512(const float* dy, const float* y, float* dx, int64_t rows,
                                                 int64_t n, bool log) {
  // Short rows four at a time: their sums (each ending in a reduction) first, then their outputs.
  constexpr int64_t kGroup = 4;
  const int64_t group = n <= kShortRow ? kGroup : 1;
  for (int64_t r0 = 0; r0 < rows; r0 += group) {
    const int64_t count = std::min(group, rows - r0);
    double totals[kGroup];
    if (group == kGroup) {  // short rows: four sums' lanes, then their reductions side by side
      __m512d lanes[kGroup];
      for (int64_t i = 0; i < kGroup; ++i) {
        const int64_t r = (r0 + i) * n;
        lanes[i] = i < count ? lanes_in_double(dy + r, log ? nullptr : y + r, n) : _mm512_setzero_pd();
      }
      reduce_four(lanes[0], lanes[1], lanes[2], lanes[3], totals);
    } else {
      totals[0] = _mm512_reduce_add_pd(lanes_in_double(dy + r0 * n, log ? nullptr : y + r0 * n, n));
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t r = (r0 + i) * n;
      if (log) {
        log_softmax_backward_avx512(dy + r, y + r, dx + r, n, static_cast<float>(totals[i]));
        continue;
      }
      const __m512 dot = _mm512_set1_ps(static_cast<float>(totals[i]));
      write_row(dx + r, n, false, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
        return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + r + j),
                             _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dy + r + j), dot));
      });
    }
  }
}

BRIGADE_AVX512 void exp_avx512(const float* x, float* y, int64_t n) {
  write_row(y, n, false, [&](int64_t j, __mmask16 m) BRIGADE_AVX512_LAMBDA {
    return exp16(_mm512_maskz_loadu_ps(m, x + j));
  });
}

BRIGADE_AVX512 void log_avx512(const double* x, double* y, int64_t n) {
  for (int64_t j = 0; j < n; j += 8) {
    const auto m = static_cast<__mmask8>(first_lanes(std::min<int64_t>(8, n - j)));
    // Lanes past n read 1 (log 0), never stored.
    const __m512d v = _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), m, x + j);
    _mm512_mask_storeu_pd(y + j, m, log8(v));
  }
}
#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
