// Reference of the fused ops (kernels.h): the plain references of the ops they fuse, called in turn, with the
// one intermediate rounding each op documents (the sum stored in x's dtype).
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

namespace {
/// t's values as they are after a store in `dtype` (t float64, the reference's dtype).
Tensor rounded_to(const Tensor& t, DType dtype) {
  return t.to(dtype).to(kFloat64);
}
}  // namespace

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  return reference::unary(UnaryOp::Gelu, rounded_to(reference::binary(BinaryOp::Add, x, bias), x.dtype()));
}

BiasGeluGrads bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias) {
  const Tensor h = rounded_to(reference::binary(BinaryOp::Add, x, bias), x.dtype());
  const Tensor dx = reference::unary_backward(UnaryOp::Gelu, dy, h, reference::unary(UnaryOp::Gelu, h));
  return {dx, reference::sum_to(rounded_to(dx, x.dtype()), bias.shape())};
}

AddLayerNormOutput add_layernorm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  const Tensor sum = reference::binary(BinaryOp::Add, x, residual);
  return {sum, reference::layernorm(rounded_to(sum, x.dtype()), weight, bias, eps)};
}

std::vector<AdamWResult> adamw_update_all(const std::vector<AdamWTensors>& tensors) {
  std::vector<AdamWResult> out;
  for (const AdamWTensors& t : tensors)
    out.push_back(reference::adamw_update(t.param, t.grad, t.m, t.v, t.step));
  return out;
}

}  // namespace brigade::kernels::reference
