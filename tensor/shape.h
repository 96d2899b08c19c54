// Shapes and strides (both in elements), and the broadcasting rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

/// Product of the sizes (1 for a 0-d shape).
int64_t shape_numel(const Shape& shape);
/// Row-major strides for `shape`.
Strides contiguous_strides(const Shape& shape);
/// "[2, 3, 4]".
std::string shape_str(const Shape& shape);
/// Wraps a possibly negative dim into [0, ndim); throws ValueError naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// NumPy broadcasting of two shapes; throws ShapeError naming `op` and the clashing dim.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace brigade
