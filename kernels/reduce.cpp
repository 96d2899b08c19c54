// Dispatch of the reductions. Every reduction is brought to one layout before the backend sees it: the
// kept dims first (in order), the reduced dims last, made contiguous and viewed as x [R, C], so that each
// output element is the reduction of one contiguous row. The backends only implement reduce_rows.
#include "kernels/cpu/reduce.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

struct RowsLayout {
  Tensor rows;      // [R, C] contiguous: one row per output element
  Shape out_shape;  // the result's shape (with or without keepdim)
  int64_t rows_count = 1;
  int64_t cols = 1;
};

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

RowsLayout to_rows(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t ndim = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) {
    // A 0-d tensor accepts dim 0 / -1 (its single element), as in PyTorch.
    int64_t w = wrap_dim(d, ndim == 0 ? 1 : ndim, op);
    if (ndim == 0) continue;
    BRIGADE_CHECK_VALUE(!reduced[static_cast<size_t>(w)], op, ": dim ", d, " appears more than once in dims ",
                        dims_str(dims));
    reduced[static_cast<size_t>(w)] = true;
  }
  RowsLayout layout;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      layout.out_shape.push_back(x.size(d));
      layout.rows_count *= x.size(d);
    } else if (keepdim) {
      layout.out_shape.push_back(1);
    }
  }
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      layout.cols *= x.size(d);
    }
  }
  Tensor permuted = ndim == 0 ? x : x.permute(perm);
  layout.rows = permuted.contiguous().view({layout.rows_count, layout.cols});
  return layout;
}

/// Whether `dims` are exactly the leading dims [0, k) of x, 0 < k < x.dim() (a bias gradient: dy [N, C] or
/// [B, T, C] summed to [C]).
bool reduces_leading_dims(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) {
    const int64_t w = d < 0 ? d + x.dim() : d;
    if (w < 0 || w >= x.dim() || reduced[static_cast<size_t>(w)]) return false;
    reduced[static_cast<size_t>(w)] = true;
  }
  const int64_t k = static_cast<int64_t>(dims.size());
  if (k == 0 || k >= x.dim()) return false;
  for (int64_t d = 0; d < k; ++d) {
    if (!reduced[static_cast<size_t>(d)]) return false;
  }
  return true;
}

Tensor reduce(ReduceOp rop, const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  NoGradGuard no_grad;  // raw op: the permute/contiguous below must not be recorded
  detail::check_defined(op, "x", x);
  detail::check_floating(op, "x", x);
  // A contiguous tensor summed over its leading dims: column sums in place (sum_columns; on the CPU with the
  // bits of the general path), instead of a transposed copy and then row sums.
  if (rop == ReduceOp::Sum && x.is_contiguous() && x.numel() > 0 && reduces_leading_dims(x, dims)) {
    const int64_t k = static_cast<int64_t>(dims.size());
    Shape out_shape;
    int64_t rows = 1;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d < k) {
        rows *= x.size(d);
        if (keepdim) out_shape.push_back(1);
      } else {
        out_shape.push_back(x.size(d));
      }
    }
    Tensor out = empty({x.numel() / rows}, detail::output_options(x, x.dtype()));
    BRIGADE_ON_BACKEND(x.device(), sum_columns(x.view({rows, x.numel() / rows}), out));
    return out.view(out_shape);
  }
  RowsLayout layout = to_rows(op, x, dims, keepdim);
  if (rop != ReduceOp::Sum) {
    BRIGADE_CHECK_SHAPE(layout.cols > 0, op, ": cannot reduce over a zero-size dim (x has shape ",
                        shape_str(x.shape()), ", dims ", dims.empty() ? std::string("all") : dims_str(dims),
                        "); the result would have no defined value");
  }
  DType out_dtype = rop == ReduceOp::ArgMax ? kInt64 : x.dtype();
  Tensor out = empty({layout.rows_count}, detail::output_options(x, out_dtype));
  if (layout.rows_count > 0) BRIGADE_ON_BACKEND(x.device(), reduce_rows(rop, layout.rows, out));
  return out.view(layout.out_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Sum, "sum", x, dims, keepdim);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  NoGradGuard no_grad;
  Tensor total = reduce(ReduceOp::Sum, "mean", x, dims, keepdim);
  if (total.numel() == 0) return total;
  const int64_t count = x.numel() / total.numel();
  // The mean of nothing is NaN (0 / 0), as in NumPy and PyTorch.
  const double scale =
      count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(count);
  BRIGADE_ON_BACKEND(total.device(), binary_scalar(BinaryOp::Mul, total, scale, false, total));
  return total;
}

Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Max, "max", x, dims, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce(ReduceOp::ArgMax, "argmax", x, {dim}, keepdim);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  NoGradGuard no_grad;
  const char* op = "sum_to";
  detail::check_defined(op, "x", x);
  detail::check_floating(op, "x", x);
  const int64_t ndim = x.dim();
  const int64_t target_ndim = static_cast<int64_t>(shape.size());
  bool broadcastable = target_ndim <= ndim;
  std::vector<int64_t> dims;
  const int64_t lead = ndim - target_ndim;
  for (int64_t d = 0; broadcastable && d < ndim; ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    int64_t want = shape[static_cast<size_t>(d - lead)];
    if (want == 1 && x.size(d) != 1) {
      dims.push_back(d);
    } else if (want != x.size(d)) {
      broadcastable = false;
    }
  }
  BRIGADE_CHECK_SHAPE(broadcastable, op, ": x of shape ", shape_str(x.shape()), " cannot be summed to shape ",
                      shape_str(shape), " (that shape must broadcast to x's shape)");
  if (dims.empty()) return x.clone();  // nothing was broadcast; still a new tensor
  return sum(x, dims, /*keepdim=*/true).view(shape);
}

}  // namespace brigade::kernels
