// PyTorch-style printing:  tensor([[1.0000, 2.0000], [3.0000, 4.0000]], dtype=float32, device=cpu)
// Tensors over 1000 elements show the first and last 3 entries of each dim with "..." between.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade {

namespace {

constexpr int64_t kSummariseAbove = 1000;
constexpr int64_t kEdgeItems = 3;

std::string format_value(double v, bool integral) {
  char buf[64];
  if (integral) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  } else if (std::isnan(v) || std::isinf(v)) {
    std::snprintf(buf, sizeof(buf), "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
  } else if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-4)) {
    std::snprintf(buf, sizeof(buf), "%.4e", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4f", v);
  }
  return buf;
}

void print_dim(std::ostringstream& out, const std::vector<double>& values, const Shape& shape,
               const Strides& strides, size_t dim, int64_t base, bool summarise, bool integral, int indent) {
  if (dim == shape.size()) {
    out << format_value(values[base], integral);
    return;
  }
  out << "[";
  int64_t n = shape[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) {
      out << "...";
      i = n - kEdgeItems - 1;
      out << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
      continue;
    }
    print_dim(out, values, shape, strides, dim + 1, base + i * strides[dim], summarise, integral, indent + 1);
    if (i + 1 < n) out << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> values;
  {
    NoGradGuard no_grad;
    values = to_vector<double>();
  }
  std::ostringstream out;
  out << "tensor(";
  bool integral = !is_floating(dtype());
  print_dim(out, values, shape(), contiguous_strides(shape()), 0, 0, numel() > kSummariseAbove, integral, 7);
  out << ", shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype()) << ", device=" << device().str();
  if (requires_grad()) out << ", requires_grad=true";
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

}  // namespace brigade
