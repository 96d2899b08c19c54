// Index arithmetic the references share: a flat row-major index <-> coordinates, the source of a broadcast
// element, and the float64 result tensor. Internal to kernels/reference/. (The broadcast shape itself is
// tensor/shape.h's broadcast_shapes.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::kernels::reference::detail {

/// Coordinates of row-major element i of `shape`.
inline std::vector<int64_t> unravel(const Shape& shape, int64_t i) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = i % shape[d];
    i /= shape[d];
  }
  return coords;
}

/// Row-major index of `coords` in `shape`.
inline int64_t ravel(const Shape& shape, const std::vector<int64_t>& coords) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + coords[d];
  return i;
}

/// Flat index into an input of shape `in` of element i of a broadcast result of shape `out`.
inline size_t broadcast_source(const Shape& out, const Shape& in, int64_t i) {
  const std::vector<int64_t> oc = unravel(out, i);
  std::vector<int64_t> ic(in.size());
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) ic[d] = in[d] == 1 ? 0 : oc[lead + d];
  return static_cast<size_t>(ravel(in, ic));
}

/// A float64 CPU tensor of `shape` holding `values` (row-major).
inline Tensor float64_tensor(const std::vector<double>& values, const Shape& shape) {
  return from_vector<double>(values, shape);
}

/// An int64 CPU tensor of `shape` holding `values`.
inline Tensor int64_tensor(const std::vector<int64_t>& values, const Shape& shape) {
  return from_vector<int64_t>(values, shape);
}

/// The logical values of any tensor as doubles (empty for an undefined tensor).
inline std::vector<double> values_of(const Tensor& t) {
  return t.defined() ? t.to_vector<double>() : std::vector<double>{};
}

/// Calls f(offset, n) for each row of the last dim of `shape` (a 0-d tensor is one row of one element).
template <typename F>
void for_each_row(const Shape& shape, F&& f) {
  const int64_t n = shape.empty() ? 1 : shape.back();
  const int64_t rows = n == 0 ? 0 : shape_numel(shape) / n;
  for (int64_t r = 0; r < rows; ++r) f(static_cast<size_t>(r * n), n);
}

}  // namespace brigade::kernels::reference::detail
