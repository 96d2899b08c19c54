// Dispatch of layernorm over the last dim: x is viewed as [R, C] (contiguous), weight and bias [C]; and of
// add_layernorm (a residual add fused into the forward on the CPU; CUDA runs the add, then layernorm).
// Statistics (mean, rstd) are float32, or float64 for float64 input; the backend accumulates dweight and
// dbias in that dtype and they are converted to the parameters' dtype here.
#include <cmath>

#include "kernels/backend.h"
#include "kernels/cpu/fused.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

DType stat_dtype(DType x) {
  return x == kFloat64 ? kFloat64 : kFloat32;
}

Shape without_last(const Shape& shape) {
  return Shape(shape.begin(), shape.end() - 1);
}

void check_param(const char* op, const char* name, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  detail::check_same_device(op, "x", x, name, p);
  detail::check_same_dtype(op, "x", x, name, p);
  BRIGADE_CHECK_SHAPE(p.shape() == Shape{x.size(-1)}, op, ": ", name, " has shape ", shape_str(p.shape()),
                      " but expected [", x.size(-1), "] (the last dim of x, which has shape ",
                      shape_str(x.shape()), ")");
}

void check_x(const char* op, const Tensor& x) {
  detail::check_defined(op, "x", x);
  detail::check_floating(op, "x", x);
  BRIGADE_CHECK_SHAPE(x.dim() >= 1, op, ": x must have at least one dim (the normalised one), found shape ",
                      shape_str(x.shape()));
}

/// The forward's checks, shared by layernorm and add_layernorm.
void check_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_x(op, x);
  check_param(op, "weight", weight, x);
  check_param(op, "bias", bias, x);
  BRIGADE_CHECK_VALUE(eps >= 0.0, op, ": eps must be >= 0, found ", eps);
}

}  // namespace

LayerNormOutput layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  NoGradGuard no_grad;
  check_forward("layernorm", x, weight, bias, eps);
  const int64_t cols = x.size(-1);
  const Shape stat_shape = without_last(x.shape());
  const int64_t rows = shape_numel(stat_shape);
  const TensorOptions stat_options = detail::output_options(x, stat_dtype(x.dtype()));
  LayerNormOutput out{empty(x.shape(), detail::output_options(x)), empty(stat_shape, stat_options),
                      empty(stat_shape, stat_options)};
  if (rows == 0) return out;
  if (cols == 0) {
    // Nothing to normalise: treat the variance of no elements as 0, so that backward gives zeros.
    out.mean.zero_();
    out.rstd.fill_(1.0 / std::sqrt(eps));
    return out;
  }
  Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  BRIGADE_ON_BACKEND(x.device(),
                     layernorm_forward(x.contiguous().view({rows, cols}), w, b, eps, out.y.view({rows, cols}),
                                       out.mean.view({rows}), out.rstd.view({rows})));
  return out;
}

AddLayerNormOutput add_layernorm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  NoGradGuard no_grad;
  const char* op = "add_layernorm";
  check_forward(op, x, weight, bias, eps);
  detail::check_defined(op, "residual", residual);
  detail::check_same_device(op, "x", x, "residual", residual);
  detail::check_same_dtype(op, "x", x, "residual", residual);
  detail::check_same_shape(op, "x", x, "residual", residual);
  const int64_t cols = x.size(-1);
  const Shape stat_shape = without_last(x.shape());
  const int64_t rows = shape_numel(stat_shape);
  if (!x.device().is_cpu() || rows == 0 || cols == 0) {  // CUDA, or nothing to fuse: the two ops in turn
    Tensor sum = binary(BinaryOp::Add, x, residual);
    return {sum, layernorm(sum, weight, bias, eps)};
  }
  const TensorOptions stat_options = detail::output_options(x, stat_dtype(x.dtype()));
  AddLayerNormOutput out{empty(x.shape(), detail::output_options(x)),
                         {empty(x.shape(), detail::output_options(x)), empty(stat_shape, stat_options),
                          empty(stat_shape, stat_options)}};
  cpu::add_layernorm_forward(x.contiguous().view({rows, cols}), residual.contiguous().view({rows, cols}),
                             weight.defined() ? weight.contiguous() : Tensor(),
                             bias.defined() ? bias.contiguous() : Tensor(), eps, out.sum.view({rows, cols}),
                             out.norm.y.view({rows, cols}), out.norm.mean.view({rows}),
                             out.norm.rstd.view({rows}));
  return out;
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias) {
  NoGradGuard no_grad;
  const char* op = "layernorm_backward";
  check_x(op, x);
  detail::check_defined(op, "dy", dy);
  detail::check_defined(op, "mean", mean);
  detail::check_defined(op, "rstd", rstd);
  detail::check_same_device(op, "x", x, "dy", dy);
  detail::check_same_device(op, "x", x, "mean", mean);
  detail::check_same_device(op, "x", x, "rstd", rstd);
  detail::check_same_dtype(op, "x", x, "dy", dy);
  detail::check_same_shape(op, "x", x, "dy", dy);
  check_param(op, "weight", weight, x);
  const DType stats = stat_dtype(x.dtype());
  const Shape stat_shape = without_last(x.shape());
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"mean", mean}, {"rstd", rstd}}) {
    BRIGADE_CHECK_DTYPE(t.dtype() == stats, op, ": ", name, " must be ", dtype_name(stats), " for ",
                        dtype_name(x.dtype()), " x, found ", dtype_name(t.dtype()));
    BRIGADE_CHECK_SHAPE(t.shape() == stat_shape, op, ": ", name, " has shape ", shape_str(t.shape()),
                        " but expected ", shape_str(stat_shape), " (x's shape ", shape_str(x.shape()),
                        " without the last dim)");
  }
  const int64_t cols = x.size(-1);
  const int64_t rows = shape_numel(stat_shape);
  const TensorOptions stat_options = detail::output_options(x, stats);
  LayerNormGrads grads;
  grads.dx = empty(x.shape(), detail::output_options(x));
  if (weight.defined()) grads.dweight = empty({cols}, stat_options);
  if (has_bias) grads.dbias = empty({cols}, stat_options);
  if (rows > 0 && cols > 0) {
    BRIGADE_ON_BACKEND(
        x.device(), layernorm_backward(dy.contiguous().view({rows, cols}), x.contiguous().view({rows, cols}),
                                       weight.defined() ? weight.contiguous() : Tensor(),
                                       mean.contiguous().view({rows}), rstd.contiguous().view({rows}),
                                       grads.dx.view({rows, cols}), grads.dweight, grads.dbias));
  } else {
    // No rows: the parameter gradients are empty sums.
    if (grads.dweight.defined()) grads.dweight.zero_();
    if (grads.dbias.defined()) grads.dbias.zero_();
  }
  if (grads.dweight.defined()) grads.dweight = grads.dweight.to(x.dtype());
  if (grads.dbias.defined()) grads.dbias = grads.dbias.to(x.dtype());
  return grads;
}

}  // namespace brigade::kernels
