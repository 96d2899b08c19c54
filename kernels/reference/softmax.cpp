// Reference softmax family over the last dim, row by row: x, y, dy [..., C]. The row max m is subtracted
// before exp so that exp never overflows: softmax_j = exp(x_j - m) / sum_k exp(x_k - m),
// log_softmax_j = x_j - m - log sum_k exp(x_k - m). A row of -inf everywhere but one entry is fine (its
// max is finite); masked entries (-inf) get probability 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::float64_tensor;
using detail::for_each_row;
using detail::values_of;

namespace {

Tensor softmax_of(const Tensor& x, bool log) {
  const std::vector<double> xv = values_of(x);
  std::vector<double> y(xv.size());
  for_each_row(x.shape(), [&](size_t off, int64_t n) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, xv[off + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(xv[off + j] - m);
    for (int64_t j = 0; j < n; ++j) {
      y[off + j] = log ? xv[off + j] - m - std::log(s) : std::exp(xv[off + j] - m) / s;
    }
  });
  return float64_tensor(y, x.shape());
}

Tensor backward_of(const Tensor& grad_y, const Tensor& y, bool log) {
  BRIGADE_CHECK_SHAPE(grad_y.shape() == y.shape(), "reference softmax backward: grad_y ",
                      shape_str(grad_y.shape()), " vs y ", shape_str(y.shape()));
  const std::vector<double> dy = values_of(grad_y), yv = values_of(y);
  std::vector<double> dx(yv.size());
  for_each_row(y.shape(), [&](size_t off, int64_t n) {
    double s = 0;  // softmax: sum(dy y); log_softmax: sum(dy)
    for (int64_t j = 0; j < n; ++j) s += log ? dy[off + j] : dy[off + j] * yv[off + j];
    for (int64_t j = 0; j < n; ++j) {
      dx[off + j] = log ? dy[off + j] - std::exp(yv[off + j]) * s : yv[off + j] * (dy[off + j] - s);
    }
  });
  return float64_tensor(dx, y.shape());
}

}  // namespace

Tensor softmax(const Tensor& x) {
  return softmax_of(x, false);
}
Tensor log_softmax(const Tensor& x) {
  return softmax_of(x, true);
}
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y) {
  return backward_of(grad_y, y, false);
}
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y) {
  return backward_of(grad_y, y, true);
}

}  // namespace brigade::kernels::reference
