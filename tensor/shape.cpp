#include "tensor/shape.h"

#include <algorithm>
#include <sstream>

#include "tensor/error.h"

namespace brigade {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  BRIGADE_CHECK_VALUE(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for a ", ndim,
                      "-d tensor (expected ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BRIGADE_CHECK_SHAPE(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                        " cannot be broadcast (dim ", static_cast<int64_t>(i) - static_cast<int64_t>(n), ": ", da,
                        " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace brigade
