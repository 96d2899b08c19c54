// CPU loops over strided tensors of any rank. for_each_offsets(shape, {strides...}, fn) calls
// fn(linear_index, offset_0, offset_1, ...) for every element in row-major order, incrementing coordinates
// like an odometer instead of dividing per element. Large loops are split into chunks run by OpenMP
// threads; each chunk computes its starting coordinates once.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensor/shape.h"

namespace brigade::detail {

template <size_t N, typename Fn>
void for_each_offsets_range(const Shape& shape, const std::array<const Strides*, N>& strides, int64_t begin,
                            int64_t end, Fn& fn) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<int64_t> coord(ndim, 0);
  std::array<int64_t, N> off{};
  int64_t rest = begin;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    coord[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
    for (size_t t = 0; t < N; ++t) off[t] += coord[d] * (*strides[t])[d];
  }
  for (int64_t i = begin; i < end; ++i) {
    std::apply([&](auto... o) { fn(i, o...); }, off);
    for (int64_t d = ndim - 1; d >= 0; --d) {  // odometer step
      ++coord[d];
      for (size_t t = 0; t < N; ++t) off[t] += (*strides[t])[d];
      if (coord[d] < shape[d]) break;
      for (size_t t = 0; t < N; ++t) off[t] -= coord[d] * (*strides[t])[d];
      coord[d] = 0;
    }
  }
}

/// Calls fn(i, off_0, ..., off_{N-1}) for each row-major element i of `shape`; may run on several threads.
template <size_t N, typename Fn>
void for_each_offsets(const Shape& shape, const std::array<const Strides*, N>& strides, Fn fn) {
  const int64_t numel = shape_numel(shape);
  constexpr int64_t kChunk = 1 << 15;
  if (numel <= kChunk) {
    for_each_offsets_range<N>(shape, strides, 0, numel, fn);
    return;
  }
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    Fn local = fn;
    for_each_offsets_range<N>(shape, strides, c * kChunk, std::min(numel, (c + 1) * kChunk), local);
  }
}

}  // namespace brigade::detail
