// CPU loops over N strided operands that share one shape (strides in elements, any rank).
//
// The shape is simplified first: size-1 dims are dropped, and neighbouring dims that lie back to back in
// *every* operand (stride[d] == stride[d + 1] * size[d + 1]) are merged. A contiguous tensor becomes one
// dim; a row vector broadcast over a contiguous matrix stays two dims ([R, C] with strides [C, 1] and
// [0, 1]); a transpose stays two. The loop then hands the caller *runs*: `count` consecutive elements along
// the innermost dim, with each operand's offset of the first element and its step along the run:
//
//   for_each_run<N>(shape, {&strides_0, ...}, grain, [&](int64_t i, int64_t count, const Offsets<N>& off,
//                                                        const Offsets<N>& step) { ... });
//
// (i is the row-major index of the run's first element). A run body is a plain pointer loop, which g++
// vectorises when the steps are 1 (callers test for that), so contiguous and row-broadcast operands run at
// memory speed; outer coordinates advance like an odometer, with no division per element.
//
// Threads: a loop of at least `grain` elements is cut into one contiguous range per OpenMP thread.
// Starting a team costs microseconds (far more on a loaded machine), so callers pass a grain that matches
// the cost of their element: large for a copy or an add, smaller for transcendental math.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/shape.h"

namespace brigade::detail {

template <size_t N>
using Offsets = std::array<int64_t, N>;

/// The simplified loop nest: dims outermost first, each with its size and one stride per operand.
template <size_t N>
struct StridedLayout {
  std::vector<int64_t> sizes;
  std::vector<Offsets<N>> strides;
  int64_t numel = 1;
};

template <size_t N>
StridedLayout<N> coalesce_dims(const Shape& shape, const std::array<const Strides*, N>& strides) {
  StridedLayout<N> layout;
  layout.numel = shape_numel(shape);
  // Walk from the innermost dim out, merging a dim into the one inside it when every operand allows.
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    Offsets<N> s{};
    for (size_t t = 0; t < N; ++t) s[t] = (*strides[t])[d];
    bool merge = !layout.sizes.empty();
    for (size_t t = 0; merge && t < N; ++t) merge = s[t] == layout.strides.back()[t] * layout.sizes.back();
    if (merge) {
      layout.sizes.back() *= shape[d];
    } else {
      layout.sizes.push_back(shape[d]);
      layout.strides.push_back(s);
    }
  }
  // Built innermost first; the loops want outermost first.
  std::vector<int64_t> sizes(layout.sizes.rbegin(), layout.sizes.rend());
  std::vector<Offsets<N>> dim_strides(layout.strides.rbegin(), layout.strides.rend());
  layout.sizes = std::move(sizes);
  layout.strides = std::move(dim_strides);
  return layout;
}

/// The runs that cover row-major elements [begin, end) of `layout`, in order.
template <size_t N, typename Run>
void for_each_run_range(const StridedLayout<N>& layout, int64_t begin, int64_t end, Run& run) {
  if (begin >= end) return;
  const int64_t ndim = static_cast<int64_t>(layout.sizes.size());
  if (ndim == 0) {  // one element (every dim had size 1)
    run(int64_t{0}, int64_t{1}, Offsets<N>{}, Offsets<N>{});
    return;
  }
  const int64_t inner = layout.sizes[static_cast<size_t>(ndim - 1)];
  const Offsets<N>& step = layout.strides[static_cast<size_t>(ndim - 1)];
  // Coordinates of `begin` in the outer dims, and the matching offsets.
  std::vector<int64_t> coord(static_cast<size_t>(ndim - 1), 0);
  Offsets<N> outer{};
  int64_t rest = begin / inner;
  for (int64_t d = ndim - 2; d >= 0; --d) {
    const auto du = static_cast<size_t>(d);
    coord[du] = rest % layout.sizes[du];
    rest /= layout.sizes[du];
    for (size_t t = 0; t < N; ++t) outer[t] += coord[du] * layout.strides[du][t];
  }
  int64_t j = begin % inner;  // position inside the first run
  for (int64_t i = begin; i < end;) {
    const int64_t count = std::min(inner - j, end - i);
    Offsets<N> off = outer;
    for (size_t t = 0; t < N; ++t) off[t] += j * step[t];
    run(i, count, off, step);
    i += count;
    j = 0;
    for (int64_t d = ndim - 2; d >= 0; --d) {  // odometer step over the outer dims
      const auto du = static_cast<size_t>(d);
      ++coord[du];
      for (size_t t = 0; t < N; ++t) outer[t] += layout.strides[du][t];
      if (coord[du] < layout.sizes[du]) break;
      for (size_t t = 0; t < N; ++t) outer[t] -= coord[du] * layout.strides[du][t];
      coord[du] = 0;
    }
  }
}

/// Calls run(i, count, offsets, steps) for runs covering every element of `shape` (see the top of this
/// file); uses several OpenMP threads when there are at least `grain` elements.
template <size_t N, typename Run>
void for_each_run(const Shape& shape, const std::array<const Strides*, N>& strides, int64_t grain, Run run) {
  const StridedLayout<N> layout = coalesce_dims<N>(shape, strides);
  if (layout.numel == 0) return;
  if (layout.numel < grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    for_each_run_range<N>(layout, 0, layout.numel, run);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    Run local = run;
    for_each_run_range<N>(layout, layout.numel * thread / threads, layout.numel * (thread + 1) / threads,
                          local);
  }
}

/// Element by element: fn(i, off_0, ..., off_{N-1}) for each row-major element i of `shape`. Simpler to
/// write than a run body, but the per-element call keeps the compiler from vectorising; prefer for_each_run
/// on hot paths.
template <size_t N, typename Fn>
void for_each_offsets(const Shape& shape, const std::array<const Strides*, N>& strides, Fn fn,
                      int64_t grain = int64_t{1} << 15) {
  for_each_run<N>(shape, strides, grain,
                  [fn](int64_t i, int64_t count, const Offsets<N>& off, const Offsets<N>& step) mutable {
                    Offsets<N> o = off;
                    for (int64_t k = 0; k < count; ++k) {
                      std::apply([&](auto... each) { fn(i + k, each...); }, o);
                      for (size_t t = 0; t < N; ++t) o[t] += step[t];
                    }
                  });
}

}  // namespace brigade::detail
