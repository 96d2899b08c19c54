// Dispatch of the fused bias + GELU (kernels.h: bias_gelu, bias_gelu_backward): x is viewed as [R, C]
// (contiguous), bias [C]. The CPU runs kernels/cpu/bias_gelu.cpp; CUDA runs the unfused kernels in turn
// (binary Add, unary Gelu; backward: unary_backward and sum_to), with the same results.
#include "kernels/backend.h"
#include "kernels/cpu/fused.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

void check_x_and_bias(const char* op, const Tensor& x, const Tensor& bias) {
  detail::check_defined(op, "x", x);
  detail::check_defined(op, "bias", bias);
  detail::check_floating(op, "x", x);
  detail::check_same_device(op, "x", x, "bias", bias);
  detail::check_same_dtype(op, "x", x, "bias", bias);
  BRIGADE_CHECK_SHAPE(x.dim() >= 1 && bias.shape() == Shape{x.size(-1)}, op,
                      ": expected x [..., C] and bias [C], found x ", shape_str(x.shape()), " and bias ",
                      shape_str(bias.shape()));
}

}  // namespace

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  NoGradGuard no_grad;
  check_x_and_bias("bias_gelu", x, bias);
  if (!x.device().is_cpu()) return unary(UnaryOp::Gelu, binary(BinaryOp::Add, x, bias));
  Tensor y = empty(x.shape(), detail::output_options(x));
  const int64_t cols = x.size(-1);
  if (y.numel() == 0) return y;
  cpu::bias_gelu_forward(x.contiguous().view({-1, cols}), bias.contiguous(), y.view({-1, cols}));
  return y;
}

BiasGeluGrads bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias) {
  NoGradGuard no_grad;
  const char* op = "bias_gelu_backward";
  check_x_and_bias(op, x, bias);
  detail::check_defined(op, "dy", dy);
  detail::check_same_device(op, "x", x, "dy", dy);
  detail::check_same_dtype(op, "x", x, "dy", dy);
  detail::check_same_shape(op, "x", x, "dy", dy);
  if (!x.device().is_cpu()) {
    const Tensor h = binary(BinaryOp::Add, x, bias);
    const Tensor dx = unary_backward(UnaryOp::Gelu, dy, h, unary(UnaryOp::Gelu, h));
    return {dx, sum_to(dx, bias.shape())};
  }
  BiasGeluGrads grads{empty(x.shape(), detail::output_options(x)),
                      empty(bias.shape(), detail::output_options(x))};
  const int64_t cols = x.size(-1);
  if (x.numel() == 0) {
    grads.dbias.zero_();  // no rows (or no columns): an empty sum
    return grads;
  }
  cpu::bias_gelu_backward(dy.contiguous().view({-1, cols}), x.contiguous().view({-1, cols}),
                          bias.contiguous(), grads.dx.view({-1, cols}), grads.dbias);
  return grads;
}

}  // namespace brigade::kernels
