// The row loops of exp_rows.h, compiled for AVX-512, AVX2 and SSE2 (see the header for why the bits agree).
//
// Napkin math (one core of this EPYC, ~3 GHz): the exp is ~25 vector operations per 16 floats, so about 12
// cycles per 16 elements on two vector ports, ~4 G exps per second. softmax over DRAM-resident rows reads
// and writes 8 bytes per element at ~8 GB/s, 1 G elements per second: the exp no longer binds there. The
// scalar libm exp it replaced in the log-softmax backward cost ~20 ns per element.
//
// The 16-lane vectors are always inlined into the target-attributed wrappers below, so the ABI that g++
// warns about (a 64-byte vector returned without AVX-512) is never used. Before the includes: the warning
// points into vector_math.h.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/exp_rows.h"

#include <cstring>

#include "kernels/cpu/row_vectors.h"
#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

namespace {

template <typename V>
BRIGADE_VECTOR_INLINE void exp_body(const float* x, float* y, int64_t n) {
  map_row<V>(x, y, n, [](const V& v) BRIGADE_LAMBDA_INLINE { return exp_v(v); });
}

template <typename V>
BRIGADE_VECTOR_INLINE float max_body(const float* x, int64_t n) {
  V best = V{} + x[0];
  int64_t k = 0;
  for (; k + kLanes<V> <= n; k += kLanes<V>) {
    const V v = load_v<V>(x + k);
    best = v > best ? v : best;
  }
  if (k < n) {
    const V v = load_part<V>(x + k, n - k, x[0]);
    best = v > best ? v : best;
  }
  float m = best[0];
  for (int l = 1; l < kLanes<V>; ++l) m = best[l] > m ? best[l] : m;
  return m;
}

template <typename V>
BRIGADE_VECTOR_INLINE double exp_shifted_sum_body(const float* x, float shift, float* e, int64_t n) {
  return sum_row<V>(n, [&](int64_t k) BRIGADE_LAMBDA_INLINE {
    if (k + kLanes<V> <= n) {
      const V v = exp_v(load_v<V>(x + k) - shift);
      store_v(e + k, v);
      return widen(v);
    }
    if (k >= n) return wide_t<V>::splat(0.0);
    V v = exp_v(load_part<V>(x + k, n - k, shift) - shift);
    store_part(e + k, v, n - k);
    for (int64_t l = n - k; l < kLanes<V>; ++l) v[l] = 0.0f;  // lanes past the row add 0
    return widen(v);
  });
}

template <typename V>
BRIGADE_VECTOR_INLINE void scale_body(float* y, int64_t n, float scale) {
  map_row<V>(y, y, n, [scale](const V& v) BRIGADE_LAMBDA_INLINE { return v * scale; });
}

template <typename V>
BRIGADE_VECTOR_INLINE void log_softmax_body(const float* x, float* y, int64_t n, double max,
                                            double log_total) {
  map_row<V>(x, y, n,
             [=](const V& v) BRIGADE_LAMBDA_INLINE { return narrow<V>((widen(v) - max) - log_total); });
}

template <typename V>
BRIGADE_VECTOR_INLINE double sum_body(const float* x, int64_t n) {
  return sum_row<V>(n, [&](int64_t k) BRIGADE_LAMBDA_INLINE { return widen(load_padded<V>(x, k, n)); });
}

template <typename V>
BRIGADE_VECTOR_INLINE double dot_body(const float* a, const float* b, int64_t n) {
  return sum_row<V>(n, [&](int64_t k) BRIGADE_LAMBDA_INLINE {
    return widen(load_padded<V>(a, k, n)) * widen(load_padded<V>(b, k, n));
  });
}

template <typename V>
BRIGADE_VECTOR_INLINE void softmax_backward_body(const float* dy, const float* y, float* dx, int64_t n,
                                                 double dot) {
  map_rows<V>(dy, y, dx, n, [dot](const V& g, const V& p) BRIGADE_LAMBDA_INLINE {
    return narrow<V>(widen(p) * (widen(g) - dot));
  });
}

template <typename V>
BRIGADE_VECTOR_INLINE void log_softmax_backward_body(const float* dy, const float* y, float* dx, int64_t n,
                                                     double dy_total) {
  map_rows<V>(dy, y, dx, n, [dy_total](const V& g, const V& p) BRIGADE_LAMBDA_INLINE {
    return narrow<V>(widen(g) - widen(exp_v(p)) * dy_total);
  });
}

template <typename V>
BRIGADE_VECTOR_INLINE void scale_twice_body(const float* e, float* g, int64_t n, double inv_total,
                                            double inv_count) {
  map_row<V>(e, g, n,
             [=](const V& v) BRIGADE_LAMBDA_INLINE { return narrow<V>(widen(v) * inv_total * inv_count); });
}

// One set of wrappers per ISA: the same bodies under a target attribute. fp-contract=off keeps g++ from
// fusing a multiply and an add where the target has FMA (AVX-512 implies it), which would change the bits.
#define BRIGADE_EXP_ROW_KERNELS(NAME, V, ATTRIBUTES)                                                      \
  ATTRIBUTES void NAME##_exp(const float* x, float* y, int64_t n) {                                       \
    exp_body<V>(x, y, n);                                                                                 \
  }                                                                                                       \
  ATTRIBUTES float NAME##_max(const float* x, int64_t n) {                                                \
    return max_body<V>(x, n);                                                                             \
  }                                                                                                       \
  ATTRIBUTES double NAME##_exp_shifted_sum(const float* x, float shift, float* e, int64_t n) {            \
    return exp_shifted_sum_body<V>(x, shift, e, n);                                                       \
  }                                                                                                       \
  ATTRIBUTES void NAME##_scale(float* y, int64_t n, float scale) {                                        \
    scale_body<V>(y, n, scale);                                                                           \
  }                                                                                                       \
  ATTRIBUTES void NAME##_log_softmax(const float* x, float* y, int64_t n, double max, double log_total) { \
    log_softmax_body<V>(x, y, n, max, log_total);                                                         \
  }                                                                                                       \
  ATTRIBUTES double NAME##_sum(const float* x, int64_t n) {                                               \
    return sum_body<V>(x, n);                                                                             \
  }                                                                                                       \
  ATTRIBUTES double NAME##_dot(const float* a, const float* b, int64_t n) {                               \
    return dot_body<V>(a, b, n);                                                                          \
  }                                                                                                       \
  ATTRIBUTES void NAME##_softmax_backward(const float* dy, const float* y, float* dx, int64_t n,          \
                                          double dot) {                                                   \
    softmax_backward_body<V>(dy, y, dx, n, dot);                                                          \
  }                                                                                                       \
  ATTRIBUTES void NAME##_log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n,      \
                                              double dy_total) {                                          \
    log_softmax_backward_body<V>(dy, y, dx, n, dy_total);                                                 \
  }                                                                                                       \
  ATTRIBUTES void NAME##_scale_twice(const float* e, float* g, int64_t n, double inv_total,               \
                                     double inv_count) {                                                  \
    scale_twice_body<V>(e, g, n, inv_total, inv_count);                                                   \
  }                                                                                                       \
  const ExpRowKernels NAME##_kernels = {NAME##_exp,                                                       \
                                        NAME##_max,                                                       \
                                        NAME##_exp_shifted_sum,                                           \
                                        NAME##_scale,                                                     \
                                        NAME##_log_softmax,                                               \
                                        NAME##_sum,                                                       \
                                        NAME##_dot,                                                       \
                                        NAME##_softmax_backward,                                          \
                                        NAME##_log_softmax_backward,                                      \
                                        NAME##_scale_twice};

BRIGADE_EXP_ROW_KERNELS(sse2, f32x4, __attribute__((optimize("fp-contract=off"))))
#if BRIGADE_CPU_AVX2
BRIGADE_EXP_ROW_KERNELS(avx2, f32x8, __attribute__((target("avx2"), optimize("fp-contract=off"))))
BRIGADE_EXP_ROW_KERNELS(avx512, f32x16, __attribute__((target("avx512f"), optimize("fp-contract=off"))))
#endif
#undef BRIGADE_EXP_ROW_KERNELS

}  // namespace

const ExpRowKernels& exp_row_kernels(VectorIsa isa) {
#if BRIGADE_CPU_AVX2
  if (isa == VectorIsa::Avx512) return avx512_kernels;
  if (isa == VectorIsa::Avx2) return avx2_kernels;
#endif
  (void)isa;
  return sse2_kernels;
}

const ExpRowKernels& exp_row_kernels() {
  return exp_row_kernels(widest_vector_isa());
}

}  // namespace brigade::kernels::cpu::detail
