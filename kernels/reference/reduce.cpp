// Reference reductions: every input element visited once in row-major order and added (or compared) into
// the output element it reduces to. Shapes: x [d0, ..., dn-1]; the output drops the reduced dims (keepdim:
// keeps them as 1).
#include <cmath>
#include <limits>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::float64_tensor;
using detail::ravel;
using detail::unravel;
using detail::values_of;

namespace {

enum class Reduction { Sum, Mean, Max };

/// Which dims of an nd-dim tensor `dims` names (empty: all).
std::vector<bool> reduced_dims(size_t nd, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims) {
    const int64_t n = static_cast<int64_t>(nd);
    BRIGADE_CHECK_SHAPE(nd == 0 || (d >= -n && d < n), "reference reduction: dim ", d, " of a ", nd,
                        "-d tensor");
    if (nd > 0) reduced[static_cast<size_t>(d < 0 ? d + n : d)] = true;
  }
  return reduced;
}

Tensor reduce(Reduction op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape& shape = x.shape();
  const std::vector<bool> reduced = reduced_dims(shape.size(), dims);
  Shape out_shape, kept_shape;  // kept_shape: the output without keepdim's 1s
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) kept_shape.push_back(shape[d]);
    if (!reduced[d] || keepdim) out_shape.push_back(reduced[d] ? 1 : shape[d]);
  }
  const auto out_n = static_cast<size_t>(shape_numel(kept_shape));
  std::vector<double> out(out_n, op == Reduction::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<int64_t> count(out_n, 0);
  const std::vector<double> xv = values_of(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::vector<int64_t> c = unravel(shape, i);
    std::vector<int64_t> kept;
    for (size_t d = 0; d < c.size(); ++d) {
      if (!reduced[d]) kept.push_back(c[d]);
    }
    const auto o = static_cast<size_t>(ravel(kept_shape, kept));
    const double v = xv[static_cast<size_t>(i)];
    out[o] = op == Reduction::Max ? std::max(out[o], v) : out[o] + v;
    ++count[o];
  }
  if (op == Reduction::Mean) {
    for (size_t o = 0; o < out_n; ++o) out[o] /= static_cast<double>(count[o]);  // 0 / 0 = NaN
  }
  return float64_tensor(out, out_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Reduction::Sum, x, dims, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Reduction::Mean, x, dims, keepdim);
}
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Reduction::Max, x, dims, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  const Shape& shape = x.shape();
  const auto nd = static_cast<int64_t>(shape.size());
  BRIGADE_CHECK_SHAPE(dim >= -nd && dim < nd, "reference argmax: dim ", dim, " of a ", nd, "-d tensor");
  const auto d = static_cast<size_t>(dim < 0 ? dim + nd : dim);
  Shape out_shape;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k != d) out_shape.push_back(shape[k]);
    if (k == d && keepdim) out_shape.push_back(1);
  }
  Shape outer = shape;  // one entry per output element: the reduced dim collapsed to 1
  outer[d] = 1;
  const std::vector<double> xv = values_of(x);
  std::vector<int64_t> out;
  for (int64_t o = 0; o < shape_numel(outer); ++o) {
    std::vector<int64_t> coords = unravel(outer, o);
    int64_t best = 0;
    double best_value = 0;
    for (int64_t j = 0; j < shape[d]; ++j) {
      coords[d] = j;
      const double v = xv[static_cast<size_t>(ravel(shape, coords))];
      if (j == 0 || v > best_value) {  // strictly greater: ties keep the first maximum
        best = j;
        best_value = v;
      }
    }
    out.push_back(best);
  }
  return detail::int64_tensor(out, out_shape);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  BRIGADE_CHECK_SHAPE(shape.size() <= x.shape().size(), "reference sum_to: ", shape_str(x.shape()), " to ",
                      shape_str(shape));
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)), 0.0);
  const std::vector<double> xv = values_of(x);
  const size_t lead = x.shape().size() - shape.size();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::vector<int64_t> xc = unravel(x.shape(), i);
    std::vector<int64_t> oc(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) oc[d] = shape[d] == 1 ? 0 : xc[lead + d];
    out[static_cast<size_t>(ravel(shape, oc))] += xv[static_cast<size_t>(i)];
  }
  return float64_tensor(out, shape);
}

}  // namespace brigade::kernels::reference
