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

using f32x16 = float __attribute__((vector_size(64)));
using f64x16 = double __attribute__((vector_size(128)));
constexpr int64_t kLanes = 16;

BRIGADE_VECTOR_INLINE f32x16 load16(const float* p) {
  return load_v<f32x16>(p);
}

/// The first `count` (< 16) elements of p, the other lanes `fill`.
BRIGADE_VECTOR_INLINE f32x16 load_part(const float* p, int64_t count, float fill) {
  float lanes[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lanes[l] = l < count ? p[l] : fill;
  return load16(lanes);
}

/// Stores the first `count` lanes of v.
BRIGADE_VECTOR_INLINE void store_part(float* p, const f32x16& v, int64_t count) {
  float lanes[kLanes];
  store_v(lanes, v);
  std::memcpy(p, lanes, static_cast<size_t>(count) * sizeof(float));
}

BRIGADE_VECTOR_INLINE f64x16 widen(const f32x16& v) {
  return __builtin_convertvector(v, f64x16);
}

BRIGADE_VECTOR_INLINE f32x16 narrow(const f64x16& v) {
  return __builtin_convertvector(v, f32x16);
}

/// The lanes of a 16-lane double sum, added in lane order.
BRIGADE_VECTOR_INLINE double lane_total(const f64x16& acc) {
  double total = 0.0;
  for (int l = 0; l < kLanes; ++l) total += acc[l];
  return total;
}

/// Calls f(offset, count) for each block of 16 elements of [0, n), count < 16 only for the last.
template <typename F>
BRIGADE_VECTOR_INLINE void for_blocks(int64_t n, F&& f) {
  for (int64_t k = 0; k < n; k += kLanes) f(k, n - k < kLanes ? n - k : kLanes);
}

BRIGADE_VECTOR_INLINE void exp_body(const float* x, float* y, int64_t n) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    if (count == kLanes) return store_v(y + k, exp_v(load16(x + k)));
    store_part(y + k, exp_v(load_part(x + k, count, 0.0f)), count);
  });
}

BRIGADE_VECTOR_INLINE float max_body(const float* x, int64_t n) {
  f32x16 best = f32x16{} + x[0];
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 v = count == kLanes ? load16(x + k) : load_part(x + k, count, x[0]);
    best = v > best ? v : best;
  });
  float m = best[0];
  for (int l = 1; l < kLanes; ++l) m = best[l] > m ? best[l] : m;
  return m;
}

BRIGADE_VECTOR_INLINE double exp_shifted_sum_body(const float* x, float shift, float* e, int64_t n) {
  f64x16 acc = {};
  for_blocks(n, [&](int64_t k, int64_t count) {
    if (count == kLanes) {
      const f32x16 v = exp_v(load16(x + k) - shift);
      store_v(e + k, v);
      acc += widen(v);
      return;
    }
    float lanes[kLanes] = {};  // lanes past the row add 0 to their sums
    const f32x16 v = exp_v(load_part(x + k, count, shift) - shift);
    store_part(lanes, v, count);
    std::memcpy(e + k, lanes, static_cast<size_t>(count) * sizeof(float));
    acc += widen(load16(lanes));
  });
  return lane_total(acc);
}

BRIGADE_VECTOR_INLINE void scale_body(float* y, int64_t n, float scale) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    if (count == kLanes) return store_v(y + k, load16(y + k) * scale);
    store_part(y + k, load_part(y + k, count, 0.0f) * scale, count);
  });
}

BRIGADE_VECTOR_INLINE void log_softmax_body(const float* x, float* y, int64_t n, double max,
                                            double log_total) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 v = count == kLanes ? load16(x + k) : load_part(x + k, count, 0.0f);
    const f32x16 out = narrow((widen(v) - max) - log_total);
    if (count == kLanes) return store_v(y + k, out);
    store_part(y + k, out, count);
  });
}

BRIGADE_VECTOR_INLINE double sum_body(const float* x, int64_t n) {
  f64x16 acc = {};
  for_blocks(n, [&](int64_t k, int64_t count) {
    acc += widen(count == kLanes ? load16(x + k) : load_part(x + k, count, 0.0f));
  });
  return lane_total(acc);
}

BRIGADE_VECTOR_INLINE double dot_body(const float* a, const float* b, int64_t n) {
  f64x16 acc = {};
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 va = count == kLanes ? load16(a + k) : load_part(a + k, count, 0.0f);
    const f32x16 vb = count == kLanes ? load16(b + k) : load_part(b + k, count, 0.0f);
    acc += widen(va) * widen(vb);
  });
  return lane_total(acc);
}

BRIGADE_VECTOR_INLINE void softmax_backward_body(const float* dy, const float* y, float* dx, int64_t n,
                                                 double dot) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 g = count == kLanes ? load16(dy + k) : load_part(dy + k, count, 0.0f);
    const f32x16 p = count == kLanes ? load16(y + k) : load_part(y + k, count, 0.0f);
    const f32x16 out = narrow(widen(p) * (widen(g) - dot));
    if (count == kLanes) return store_v(dx + k, out);
    store_part(dx + k, out, count);
  });
}

BRIGADE_VECTOR_INLINE void log_softmax_backward_body(const float* dy, const float* y, float* dx, int64_t n,
                                                     double dy_total) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 g = count == kLanes ? load16(dy + k) : load_part(dy + k, count, 0.0f);
    const f32x16 p = exp_v(count == kLanes ? load16(y + k) : load_part(y + k, count, 0.0f));
    const f32x16 out = narrow(widen(g) - widen(p) * dy_total);
    if (count == kLanes) return store_v(dx + k, out);
    store_part(dx + k, out, count);
  });
}

BRIGADE_VECTOR_INLINE void scale_twice_body(const float* e, float* g, int64_t n, double inv_total,
                                            double inv_count) {
  for_blocks(n, [&](int64_t k, int64_t count) {
    const f32x16 v = count == kLanes ? load16(e + k) : load_part(e + k, count, 0.0f);
    const f32x16 out = narrow(widen(v) * inv_total * inv_count);
    if (count == kLanes) return store_v(g + k, out);
    store_part(g + k, out, count);
  });
}

// One set of wrappers per ISA: the same bodies under a target attribute. fp-contract=off keeps g++ from
// fusing a multiply and an add where the target has FMA (AVX-512 implies it), which would change the bits.
#define BRIGADE_EXP_ROW_KERNELS(NAME, ATTRIBUTES)                                                         \
  ATTRIBUTES void NAME##_exp(const float* x, float* y, int64_t n) {                                       \
    exp_body(x, y, n);                                                                                    \
  }                                                                                                       \
  ATTRIBUTES float NAME##_max(const float* x, int64_t n) {                                                \
    return max_body(x, n);                                                                                \
  }                                                                                                       \
  ATTRIBUTES double NAME##_exp_shifted_sum(const float* x, float shift, float* e, int64_t n) {            \
    return exp_shifted_sum_body(x, shift, e, n);                                                          \
  }                                                                                                       \
  ATTRIBUTES void NAME##_scale(float* y, int64_t n, float scale) {                                        \
    scale_body(y, n, scale);                                                                              \
  }                                                                                                       \
  ATTRIBUTES void NAME##_log_softmax(const float* x, float* y, int64_t n, double max, double log_total) { \
    log_softmax_body(x, y, n, max, log_total);                                                            \
  }                                                                                                       \
  ATTRIBUTES double NAME##_sum(const float* x, int64_t n) {                                               \
    return sum_body(x, n);                                                                                \
  }                                                                                                       \
  ATTRIBUTES double NAME##_dot(const float* a, const float* b, int64_t n) {                               \
    return dot_body(a, b, n);                                                                             \
  }                                                                                                       \
  ATTRIBUTES void NAME##_softmax_backward(const float* dy, const float* y, float* dx, int64_t n,          \
                                          double dot) {                                                   \
    softmax_backward_body(dy, y, dx, n, dot);                                                             \
  }                                                                                                       \
  ATTRIBUTES void NAME##_log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n,      \
                                              double dy_total) {                                          \
    log_softmax_backward_body(dy, y, dx, n, dy_total);                                                    \
  }                                                                                                       \
  ATTRIBUTES void NAME##_scale_twice(const float* e, float* g, int64_t n, double inv_total,               \
                                     double inv_count) {                                                  \
    scale_twice_body(e, g, n, inv_total, inv_count);                                                      \
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

BRIGADE_EXP_ROW_KERNELS(sse2, __attribute__((optimize("fp-contract=off"))))
#if BRIGADE_CPU_AVX2
BRIGADE_EXP_ROW_KERNELS(avx2, __attribute__((target("avx2"), optimize("fp-contract=off"))))
BRIGADE_EXP_ROW_KERNELS(avx512, __attribute__((target("avx512f"), optimize("fp-contract=off"))))
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
