// What the AVX-512 row loops share (softmax and cross-entropy v2, layernorm v2, GELU v3): the target
// attributes that let one file hold AVX-512 code whatever the build's -march, the mask of a row's last
// partial vector, a vector widened to doubles, and the loop that writes a row 16 lanes at a time. Include
// only from code called where the CPU has AVX-512F and FMA (cpu_features()).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86

#if BRIGADE_CPU_X86
#include <immintrin.h>

// Functions holding AVX-512 code: compiled for AVX-512F with FMA whatever the build's -march.
#define BRIGADE_AVX512 __attribute__((target("avx512f,fma")))
#define BRIGADE_AVX512_INLINE __attribute__((target("avx512f,fma"), always_inline)) inline
// A lambda inside such a function does not inherit its target: it says so itself.
#define BRIGADE_AVX512_LAMBDA __attribute__((target("avx512f,fma"), always_inline))

namespace brigade::kernels::cpu::detail {

/// The mask of the first `count` lanes (count in [0, 16]).
BRIGADE_AVX512_INLINE __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}

/// The 16 floats of a vector as doubles: the low 8 lanes, then the high 8.
struct Wide {
  __m512d lo, hi;
};

BRIGADE_AVX512_INLINE Wide widen(__m512 v) {
  return {_mm512_cvtps_pd(_mm512_castps512_ps256(v)),
          _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))};
}

/// 16 floats from p + j widened to doubles (under mask k for a row's tail). A whole vector is two 8-float
/// loads converted as they load: widen() of a loaded vector pays a 512-bit extract, which held the
/// softmax backward's double sums to ~2/3 of this rate on Zen 4.
BRIGADE_AVX512_INLINE Wide load_wide(const float* p, int64_t j, __mmask16 k) {
  if (k == 0xffff)
    return {_mm512_cvtps_pd(_mm256_loadu_ps(p + j)), _mm512_cvtps_pd(_mm256_loadu_ps(p + j + 8))};
  return widen(_mm512_maskz_loadu_ps(k, p + j));
}

/// sum += v widened: a running sum of float vectors kept in 16 double lanes.
BRIGADE_AVX512_INLINE void add_widened(Wide& sum, __m512 v) {
  const Wide w = widen(v);
  sum.lo = _mm512_add_pd(sum.lo, w.lo);
  sum.hi = _mm512_add_pd(sum.hi, w.hi);
}

/// y[j .. j + 16) = f(j, mask) over a row of n floats (mask: the lanes inside the row; the tail stores
/// those only). With `stream`, the stores from the first 64-byte boundary of y on are non-temporal (they
/// need that alignment), then a fence: for outputs too big to stay in the cache.
template <typename F>
BRIGADE_AVX512_INLINE void write_row(float* y, int64_t n, bool stream, F f) {
  int64_t j = 0;
  if (stream) {
    const auto misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(y) & 63u);
    const int64_t head = std::min(n, ((64 - misaligned) & 63) / static_cast<int64_t>(sizeof(float)));
    if (head > 0) _mm512_mask_storeu_ps(y, first_lanes(head), f(0, first_lanes(head)));
    for (j = head; j + 16 <= n; j += 16) _mm512_stream_ps(y + j, f(j, first_lanes(16)));
  } else {
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, f(j, first_lanes(16)));
  }
  if (j < n) _mm512_mask_storeu_ps(y + j, first_lanes(n - j), f(j, first_lanes(n - j)));
  if (stream) _mm_sfence();
}

}  // namespace brigade::kernels::cpu::detail

#endif  // BRIGADE_CPU_X86
