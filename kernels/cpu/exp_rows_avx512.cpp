// The AVX-512 + FMA row loops of softmax and cross-entropy v2 (exp_rows_avx512.h says what changes from
// v1).
//
// Napkin math, one core of this EPYC (~3 GHz, 28.6 GB/s single-core read stream in bench/stream_bench):
// Every exp here has an argument of at most 0 (x - max, or a log-probability), so the rows call
// exp16_not_above_88: exp16's bits without the three instructions that handle arguments above 88.
// exp16 is ~12 instructions per 16 floats, 9 of them on the two FMA pipes: ~5 cycles, ~10 G exps per
// second. A pass over a row reads 4 bytes per element: at 28.6 GB/s that is 7 G elements per second, so
// with max_exp_sum's one read (plus the L1 re-read of each chunk) the exp no longer binds once rows stream
// from DRAM. softmax forward: 1 read for the sums + 1 read and 1 write for the output = 12 bytes an element
// (v1: 20). Cross-entropy without the gradient: 4 bytes (v1: 12, it stored the exps in a scratch row).
// g++ 12 warns "__Y is (or may be) used uninitialized" inside _mm512_max_ps, _mm512_cvtps_pd and the
// reductions (their _mm512_undefined_* pass-through operand, fully overwritten under an all-ones mask): a
// known false positive of its headers. Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/exp_rows_avx512.h"

#include "kernels/cpu/exp_avx512.h"

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
/// lanes. The next chunk's lines are prefetched while this one is summed. With kStore, each exp is also
/// written to out[j].
template <bool kStore = false>
BRIGADE_AVX512_INLINE double chunk_exp_sum(const float* x, int64_t n, float shift, const float* next,
                                           float* out = nullptr) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  auto add = [&](__m512 v) BRIGADE_AVX512_LAMBDA {
    const Wide w = widen(v);
    lo = _mm512_add_pd(lo, w.lo);
    hi = _mm512_add_pd(hi, w.hi);
  };
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    if (next != nullptr) {
      for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(next + j + 16 * l), _MM_HINT_T0);
    }
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
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

}  // namespace

BRIGADE_AVX512 double max_exp_sum_avx512(const float* x, int64_t n, float* max) {
  float running = 0.0f;
  double total = 0.0;
  for (int64_t c0 = 0; c0 < n; c0 += kExpChunk) {
    const int64_t len = std::min(kExpChunk, n - c0);
    const float m = chunk_max(x + c0, len);
    if (c0 == 0) {
      running = m;
    } else if (m > running) {  // rescale what was summed against the old max
      total *= std::exp(static_cast<double>(running) - static_cast<double>(m));
      running = m;
    }
    // A prefix of -inf only (a masked start) adds nothing: exp(-inf - -inf) would be NaN.
    if (running == -std::numeric_limits<float>::infinity()) continue;
    const float* next = c0 + kExpChunk < n ? x + c0 + kExpChunk : nullptr;
    total += chunk_exp_sum(x + c0, len, running, next);
  }
  *max = running;
  return total;
}

BRIGADE_AVX512 void max_exp_sum_rows_avx512(const float* x, int64_t rows, int64_t n, float* max,
                                            double* total, float* y) {
  // Phase by phase over a group of rows: each row's max, then each row's sum. A short row's work is a
  // chain (the max's reduction feeds every exp; the sum's reduction ends it) longer than its few vectors
  // take to issue; the group's chains overlap.
  constexpr int64_t kGroup = 4;
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int64_t group = std::min(kGroup, rows - r0);
    for (int64_t r = r0; r < r0 + group; ++r) max[r] = chunk_max(x + r * n, n);
    for (int64_t r = r0; r < r0 + group; ++r) {
      // As max_exp_sum_avx512: a row of -inf only sums to 0 (and, storing, writes nothing).
      if (max[r] == -std::numeric_limits<float>::infinity()) {
        total[r] = 0.0;
      } else if (y != nullptr) {
        total[r] = chunk_exp_sum<true>(x + r * n, n, max[r], nullptr, y + r * n);
      } else {
        total[r] = chunk_exp_sum(x + r * n, n, max[r], nullptr);
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

/// sum_j a[j] (b null) or sum_j a[j] b[j] in double, as v1's sums: every float widened, so that a product
/// of two floats is exact; two sets of accumulators, so that consecutive vectors do not wait on each other.
BRIGADE_AVX512_INLINE double sum_in_double(const float* a, const float* b, int64_t n) {
  __m512d acc[2][2] = {{_mm512_setzero_pd(), _mm512_setzero_pd()},
                       {_mm512_setzero_pd(), _mm512_setzero_pd()}};
  for (int64_t j = 0, set = 0; j < n; j += 16, set ^= 1) {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - j));
    const auto [a_lo, a_hi] = widen(_mm512_maskz_loadu_ps(m, a + j));
    if (b == nullptr) {
      acc[set][0] = _mm512_add_pd(acc[set][0], a_lo);
      acc[set][1] = _mm512_add_pd(acc[set][1], a_hi);
    } else {
      const auto [b_lo, b_hi] = widen(_mm512_maskz_loadu_ps(m, b + j));
      acc[set][0] = _mm512_fmadd_pd(a_lo, b_lo, acc[set][0]);
      acc[set][1] = _mm512_fmadd_pd(a_hi, b_hi, acc[set][1]);
    }
  }
  return _mm512_reduce_add_pd(
      _mm512_add_pd(_mm512_add_pd(acc[0][0], acc[0][1]), _mm512_add_pd(acc[1][0], acc[1][1])));
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
    for (int64_t i = 0; i < count; ++i) {
      const int64_t r = (r0 + i) * n;
      totals[i] = sum_in_double(dy + r, log ? nullptr : y + r, n);
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
#endif  // BRIGADE_CPU_X86

}  // namespace brigade::kernels::cpu::detail
