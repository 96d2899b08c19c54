// The vector pieces that the float32 row loops share (exp_rows.cpp: softmax, log-softmax, cross-entropy;
// layernorm_rows.cpp: layernorm): loads and stores of a row's tail, maps over a row, and double sums in a
// fixed 16-lane order. Everything is a template over the float vector type V of vector_math.h (4, 8 or 16
// lanes) and always inlined, so that a file compiles the same code once per ISA under a target attribute
// and every ISA gives the same bits (see exp_rows.h). Internal to kernels/cpu/.
//
// A file that includes this must disable -Wpsabi before its includes (16-lane vectors returned by value
// without AVX-512: never through the ABI, as everything here is inlined).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

// A lambda's body is a function of its own, compiled for the file's default target (SSE2) unless it is
// inlined into the target-attributed wrapper; always_inline makes sure it is.
#define BRIGADE_LAMBDA_INLINE __attribute__((always_inline))

constexpr int64_t kSumLanes = 16;  // element k of a sum goes into double lane k mod 16, on every ISA

template <typename V>
constexpr int64_t kLanes = sizeof(V) / sizeof(float);

/// The double vector with V's lane count, held as two halves of the ISA's own register width (V = 16 floats
/// on AVX-512: two 8-double zmm registers). One vector type of twice the register width would have no
/// machine mode: g++ keeps such a value in memory, and every add of a running sum became a store and a load.
template <typename V>
struct Halves;
template <>
struct Halves<f32x4> {
  using floats = float __attribute__((vector_size(8)));
  using doubles = double __attribute__((vector_size(16)));
};
template <>
struct Halves<f32x8> {
  using floats = f32x4;
  using doubles = double __attribute__((vector_size(32)));
};
template <>
struct Halves<f32x16> {
  using floats = f32x8;
  using doubles = double __attribute__((vector_size(64)));
};

template <typename V>
struct WideV {
  using D = typename Halves<V>::doubles;
  static constexpr int64_t kHalf = kLanes<V> / 2;
  D lo, hi;  // lanes 0 .. kHalf - 1 and kHalf .. lanes - 1

  BRIGADE_VECTOR_INLINE static WideV splat(double x) { return {D{} + x, D{} + x}; }
  BRIGADE_VECTOR_INLINE double lane(int64_t l) const { return l < kHalf ? lo[l] : hi[l - kHalf]; }
  BRIGADE_VECTOR_INLINE WideV& operator+=(const WideV& b) {
    lo += b.lo, hi += b.hi;
    return *this;
  }
  // Lane by lane, as the vector types' own operators; a double operand is every lane.
  BRIGADE_VECTOR_INLINE friend WideV operator+(const WideV& a, const WideV& b) {
    return {a.lo + b.lo, a.hi + b.hi};
  }
  BRIGADE_VECTOR_INLINE friend WideV operator-(const WideV& a, const WideV& b) {
    return {a.lo - b.lo, a.hi - b.hi};
  }
  BRIGADE_VECTOR_INLINE friend WideV operator*(const WideV& a, const WideV& b) {
    return {a.lo * b.lo, a.hi * b.hi};
  }
  BRIGADE_VECTOR_INLINE friend WideV operator+(const WideV& a, double b) { return {a.lo + b, a.hi + b}; }
  BRIGADE_VECTOR_INLINE friend WideV operator-(const WideV& a, double b) { return {a.lo - b, a.hi - b}; }
  BRIGADE_VECTOR_INLINE friend WideV operator*(const WideV& a, double b) { return {a.lo * b, a.hi * b}; }
  BRIGADE_VECTOR_INLINE friend WideV operator*(double a, const WideV& b) { return {a * b.lo, a * b.hi}; }
};

template <typename V>
using wide_t = WideV<V>;

template <typename V, size_t... I>
BRIGADE_VECTOR_INLINE typename Halves<V>::floats lanes_of(const V& v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, I...);
}

template <typename V, size_t... I>
BRIGADE_VECTOR_INLINE typename Halves<V>::floats upper_lanes_of(const V& v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (I + kLanes<V> / 2)...);
}

template <typename H, size_t... I>
BRIGADE_VECTOR_INLINE auto join(const H& lo, const H& hi, std::index_sequence<I...>) {
  return __builtin_shufflevector(lo, hi, I...);
}

template <typename V>
BRIGADE_VECTOR_INLINE wide_t<V> widen(const V& v) {
  using D = typename Halves<V>::doubles;
  constexpr auto half = std::make_index_sequence<kLanes<V> / 2>();
  return {__builtin_convertvector(lanes_of(v, half), D), __builtin_convertvector(upper_lanes_of(v, half), D)};
}

#if BRIGADE_CPU_AVX2 && !defined(__clang__)
// g++ 12 lowers __builtin_convertvector from 4 floats to 4 doubles, or 8 to 8, as two half-width converts and
// an insert (with the extract, five instructions where one does: `perf annotate` put ~20 % of the
// cross-entropy's exp-sum loop on them). So the two widest types convert with one vcvtps2pd per half,
// written as inline asm: an intrinsic needs a target attribute on every function it is inlined through,
// and the row bodies here have none (the asm is checked only where it lands, in the AVX2 or AVX-512
// wrapper). Widening is exact, so the bits are the same as the builtin's.
BRIGADE_VECTOR_INLINE wide_t<f32x8> widen(const f32x8& v) {
  const f32x4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3), hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  Halves<f32x8>::doubles wide_lo, wide_hi;  // locals, not the struct's members: those were kept in memory
  asm("vcvtps2pd %1, %0" : "=x"(wide_lo) : "x"(lo));
  asm("vcvtps2pd %1, %0" : "=x"(wide_hi) : "x"(hi));
  return {wide_lo, wide_hi};
}

BRIGADE_VECTOR_INLINE wide_t<f32x16> widen(const f32x16& v) {
  constexpr auto half = std::make_index_sequence<8>();
  const f32x8 lo = lanes_of(v, half), hi = upper_lanes_of(v, half);
  Halves<f32x16>::doubles wide_lo, wide_hi;
  asm("vcvtps2pd %1, %0" : "=v"(wide_lo) : "v"(lo));
  asm("vcvtps2pd %1, %0" : "=v"(wide_hi) : "v"(hi));
  return {wide_lo, wide_hi};
}
#endif

template <typename V>
BRIGADE_VECTOR_INLINE V narrow(const wide_t<V>& v) {
  using F = typename Halves<V>::floats;
  return join(__builtin_convertvector(v.lo, F), __builtin_convertvector(v.hi, F),
              std::make_index_sequence<kLanes<V>>());
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
  wide_t<V> part[kParts] = {};  // each part's halves are registers: a constant index after unrolling

  /// Adds term(offset of a vector) for the 16 elements at `base` (offsets base, base + lanes, ...).
  template <typename F>
  BRIGADE_VECTOR_INLINE void add_block(int64_t base, F term) {
#pragma GCC unroll 4
    for (int64_t p = 0; p < kParts; ++p) part[p] += term(base + p * kLanes<V>);
  }

  /// The 16 lanes added in lane order.
  BRIGADE_VECTOR_INLINE double total() const {
    double t = 0.0;
    for (int64_t p = 0; p < kParts; ++p) {
      for (int64_t l = 0; l < kLanes<V>; ++l) t += part[p].lane(l);
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

/// Two sums over [0, n) in one pass, each in Sum16's lanes: add(k, first, second) adds the two sums' terms
/// for elements k .. k + lanes (zeros past n, as for sum_row) into the running sums it is handed. (Returning
/// the two terms as a pair instead kept the pair in memory: g++ does not split aggregates that large.)
template <typename V, typename F>
BRIGADE_VECTOR_INLINE std::pair<double, double> sum_row_pair(int64_t n, F add) {
  Sum16<V> first, second;
  auto add_block = [&](int64_t base) BRIGADE_LAMBDA_INLINE {
#pragma GCC unroll 4
    for (int64_t p = 0; p < Sum16<V>::kParts; ++p) add(base + p * kLanes<V>, first.part[p], second.part[p]);
  };
  int64_t k = 0;
  for (; k + kSumLanes <= n; k += kSumLanes) add_block(k);
  if (k < n) add_block(k);
  return {first.total(), second.total()};
}

template <typename V>
BRIGADE_VECTOR_INLINE V load_padded(const float* p, int64_t k, int64_t n) {
  return k + kLanes<V> <= n ? load_v<V>(p + k) : load_part<V>(p + k, n > k ? n - k : 0, 0.0f);
}

}  // namespace brigade::kernels::cpu::detail
