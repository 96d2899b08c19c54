// Reference layernorm over the last dim, row by row: x, y, dy, dx [..., C]; weight, bias, dweight, dbias
// [C]; mean, rstd [...]. Two passes for the statistics (mean, then the mean of squared deviations), so the
// variance does not lose digits to a large mean:
//   mu = sum x / C,  var = sum (x - mu)^2 / C,  rstd = 1 / sqrt(var + eps),  xhat = (x - mu) rstd,
//   y = xhat w + b.
// Backward with g = dy w:  dx = rstd (g - mean(g) - xhat mean(g xhat)),  dw = sum_rows dy xhat,
// db = sum_rows dy.
#include <cmath>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::float64_tensor;
using detail::for_each_row;
using detail::values_of;

namespace {
Shape row_stat_shape(const Tensor& x) {
  BRIGADE_CHECK_SHAPE(x.dim() >= 1, "reference layernorm: x needs a last dim, found 0-d");
  return Shape(x.shape().begin(), x.shape().end() - 1);
}
}  // namespace

LayerNormOutput layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const std::vector<double> xv = values_of(x), w = values_of(weight), b = values_of(bias);
  std::vector<double> y(xv.size()), mean, rstd;
  for_each_row(x.shape(), [&](size_t off, int64_t n) {
    const auto count = static_cast<double>(n);
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mu += xv[off + j] / count;
    for (int64_t j = 0; j < n; ++j) var += (xv[off + j] - mu) * (xv[off + j] - mu) / count;
    const double r = 1.0 / std::sqrt(var + eps);
    mean.push_back(mu);
    rstd.push_back(r);
    for (int64_t j = 0; j < n; ++j) {
      const auto c = static_cast<size_t>(j);
      y[off + c] = (xv[off + c] - mu) * r * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
    }
  });
  const Shape stats = row_stat_shape(x);
  return {float64_tensor(y, x.shape()), float64_tensor(mean, stats), float64_tensor(rstd, stats)};
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias) {
  BRIGADE_CHECK_SHAPE(dy.shape() == x.shape(), "reference layernorm_backward: dy ", shape_str(dy.shape()),
                      " vs x ", shape_str(x.shape()));
  const std::vector<double> xv = values_of(x), g = values_of(dy), w = values_of(weight);
  const std::vector<double> mu = values_of(mean), r = values_of(rstd);
  const int64_t C = x.dim() == 0 ? 1 : x.size(-1);
  std::vector<double> dx(xv.size()), dw(static_cast<size_t>(C), 0.0), db(static_cast<size_t>(C), 0.0);
  size_t row = 0;
  for_each_row(x.shape(), [&](size_t off, int64_t n) {
    const auto count = static_cast<double>(n);
    auto xhat = [&](size_t j) { return (xv[off + j] - mu[row]) * r[row]; };
    auto gw = [&](size_t j) { return g[off + j] * (w.empty() ? 1.0 : w[j]); };
    double sum_g = 0, sum_gx = 0;
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      sum_g += gw(j);
      sum_gx += gw(j) * xhat(j);
      dw[j] += g[off + j] * xhat(j);
      db[j] += g[off + j];
    }
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      dx[off + j] = r[row] * (gw(j) - sum_g / count - xhat(j) * sum_gx / count);
    }
    ++row;
  });
  LayerNormGrads grads;
  grads.dx = float64_tensor(dx, x.shape());
  if (weight.defined()) grads.dweight = float64_tensor(dw, {C});
  if (has_bias) grads.dbias = float64_tensor(db, {C});
  return grads;
}

}  // namespace brigade::kernels::reference
