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

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

namespace {

// A lambda's body is a function of its own, compiled for the file's default target (SSE2) unless it is
// inlined into the target-attributed wrapper; always_inline makes sure it is.
#define BRIGADE_LAMBDA_INLINE __attribute__((always_inline))

constexpr int64_t kSumLanes = 16;  // element k of a sum goes into double lane k mod 16, on every ISA

template <typename V>
constexpr int64_t kLanes = sizeof(V) / sizeof(float);

/// The double vector with V's lane count.
template <typename V>
struct Wide;
template <>
struct Wide<f32x4> {
  using type = double __attribute__((vector_size(32)));
};
template <>
struct Wide<f32x8> {
  using type = double __attribute__((vector_size(64)));
};
template <>
struct Wide<f32x16> {
  using type = double __attribute__((vector_size(128)));
};
template <typename V>
using wide_t = typename Wide<V>::type;

template <typename V>
BRIGADE_VECTOR_INLINE wide_t<V> widen(const V& v) {
  return __builtin_convertvector(v, wide_t<V>);
}

template <typename V>
BRIGADE_VECTOR_INLINE V narrow(const wide_t<V>& v) {
  return __builtin_convertvector(v, V);
}

/// The first `count` (< lanes) elements of p, the other lanes `fill`.
template <typename V>
BRIGADE_VECTOR_INLINE V load_part(const float* p, int64_t count, float fill) {
  float lanes[kLanes<V>];
  for (int64_t l = 0; l < kLanes<V>; ++l) lanes[l] = l < count ? p[l] : fill;
  return load_v<V>(lanes);
}

/// Stores the first `count` lanes of v.
template <typename V>
BRIGADE_VECTOR_INLINE void store_part(float* p, const V& v, int64_t count) {
  float lanes[kLanes<V>];
  store_v(lanes, v);
  std::memcpy(p, lanes, static_cast<size_t>(count) * sizeof(float));
}

/// out[k] = f(a[k]) (and b[k]) for k in [0, n), V's lanes at a time; the tail through a padded vector.
template <typename V, typename F>
BRIGADE_VECTOR_INLINE void map_row(const float* a, float* out, int64_t n, F f) {
  int64_t k = 0;
  for (; k + kLanes<V> <= n; k += kLanes<V>) store_v(out + k, f(load_v<V>(a + k)));
  if (k < n) store_part(out + k, f(load_part<V>(a + k, n - k, 0.0f)), n - k);
}

template <typename V, typename F>
BRIGADE_VECTOR_INLINE void map_rows(const float* a, const float* b, float* out, int64_t n, F f) {
  int64_t k = 0;
  for (; k + kLanes<V> <= n; k += kLanes<V>) store_v(out + k, f(load_v<V>(a + k), load_v<V>(b + k)));
  if (k < n)
    store_part(out + k, f(load_part<V>(a + k, n - k, 0.0f), load_part<V>(b + k, n - k, 0.0f)), n - k);
}

/// A double sum in 16 lanes: kSumLanes / lanes vectors of V's width.
template <typename V>
struct Sum16 {
  static constexpr int64_t kParts = kSumLanes / kLanes<V>;
  wide_t<V> part[kParts] = {};

  /// Adds term(offset of a vector) for the 16 elements at `base` (offsets base, base + lanes, ...).
  template <typename F>
  BRIGADE_VECTOR_INLINE void add_block(int64_t base, F term) {
    for (int64_t p = 0; p < kParts; ++p) part[p] += term(base + p * kLanes<V>);
  }

  /// The 16 lanes added in lane order.
  BRIGADE_VECTOR_INLINE double total() const {
    double t = 0.0;
    for (int64_t p = 0; p < kParts; ++p) {
      for (int64_t l = 0; l < kLanes<V>; ++l) t += part[p][l];
    }
    return t;
  }
};

/// The sum of term over [0, n) in Sum16's lanes; term(k) gives the double lanes of elements k .. k + lanes
/// from rows padded with zeros past n (pad copies the last < 16 elements of each row into buffers).
template <typename V, typename F>
BRIGADE_VECTOR_INLINE double sum_row(int64_t n, F term) {
  Sum16<V> acc;
  int64_t k = 0;
  for (; k + kSumLanes <= n; k += kSumLanes) acc.add_block(k, term);
  if (k < n) acc.add_block(k, term);  // term pads past n itself
  return acc.total();
}

template <typename V>
BRIGADE_VECTOR_INLINE V load_padded(const float* p, int64_t k, int64_t n) {
  return k + kLanes<V> <= n ? load_v<V>(p + k) : load_part<V>(p + k, n > k ? n - k : 0, 0.0f);
}

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
    if (k >= n) return wide_t<V>{};
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

bool vector_isa_runs(VectorIsa isa) {
#if BRIGADE_CPU_AVX2
  if (isa == VectorIsa::Avx512) return cpu_features().avx512f;
  if (isa == VectorIsa::Avx2) return cpu_has_avx2();
#endif
  return isa == VectorIsa::Sse2;
}

VectorIsa widest_vector_isa() {
  static const VectorIsa widest = vector_isa_runs(VectorIsa::Avx512) ? VectorIsa::Avx512
                                  : vector_isa_runs(VectorIsa::Avx2) ? VectorIsa::Avx2
                                                                     : VectorIsa::Sse2;
  return widest;
}

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
