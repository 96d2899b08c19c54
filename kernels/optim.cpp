// Dispatch of the optimizer math: the in-place AdamW update (of one parameter, or of a list in one pass on
// the CPU) and the global L2 norm used for clipping.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/fused.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

void check_adamw(const char* op, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 const AdamWStep& s) {
  detail::check_defined(op, "param", param);
  detail::check_defined(op, "grad", grad);
  detail::check_defined(op, "m", m);
  detail::check_defined(op, "v", v);
  detail::check_same_device(op, "param", param, "grad", grad);
  detail::check_same_device(op, "param", param, "m", m);
  detail::check_same_device(op, "param", param, "v", v);
  detail::check_floating(op, "param", param);
  detail::check_same_dtype(op, "param", param, "grad", grad);
  const DType state_dtype = param.dtype() == kFloat64 ? kFloat64 : kFloat32;
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"m", m}, {"v", v}}) {
    BRIGADE_CHECK_DTYPE(t.dtype() == state_dtype, op, ": ", name, " must be ", dtype_name(state_dtype),
                        " for a ", dtype_name(param.dtype()), " param, found ", dtype_name(t.dtype()));
  }
  detail::check_same_shape(op, "param", param, "grad", grad);
  detail::check_same_shape(op, "param", param, "m", m);
  detail::check_same_shape(op, "param", param, "v", v);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"param", param}, {"m", m}, {"v", v}}) {
    BRIGADE_CHECK_VALUE(t.is_contiguous(), op, ": ", name, " (shape ", shape_str(t.shape()),
                        ") must be contiguous: it is updated in place");
  }
  BRIGADE_CHECK_VALUE(s.step >= 1, op, ": step is 1-based (for bias correction), found ", s.step);
  BRIGADE_CHECK_VALUE(s.beta1 >= 0.0 && s.beta1 < 1.0 && s.beta2 >= 0.0 && s.beta2 < 1.0, op,
                      ": beta1 and beta2 must lie in [0, 1), found ", s.beta1, " and ", s.beta2);
  BRIGADE_CHECK_VALUE(s.eps >= 0.0, op, ": eps must be >= 0, found ", s.eps);
}

}  // namespace

void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWStep& s) {
  NoGradGuard no_grad;
  check_adamw("adamw_update", param, grad, m, v, s);
  if (param.numel() == 0) return;
  BRIGADE_ON_BACKEND(param.device(), adamw(param, grad.contiguous(), m, v, s));
}

void adamw_update_all(const std::vector<AdamWTensors>& tensors) {
  NoGradGuard no_grad;
  std::vector<AdamWTensors> on_cpu;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensors& t = tensors[i];
    const std::string op = "adamw_update_all (entry " + std::to_string(i) + ")";
    check_adamw(op.c_str(), t.param, t.grad, t.m, t.v, t.step);
    if (t.param.numel() == 0) continue;
    if (t.param.device().is_cpu()) {
      on_cpu.push_back(AdamWTensors{t.param, t.grad.contiguous(), t.m, t.v, t.step});
    } else {
      BRIGADE_ON_BACKEND(t.param.device(), adamw(t.param, t.grad.contiguous(), t.m, t.v, t.step));
    }
  }
  if (!on_cpu.empty()) cpu::adamw_all(on_cpu);
}

double global_l2_norm(const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  const char* op = "global_l2_norm";
  double total = 0.0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;  // a parameter without a gradient contributes nothing
    const std::string name = "tensors[" + std::to_string(i) + "]";
    detail::check_floating(op, name.c_str(), t);
    if (t.numel() == 0) continue;
    total += BRIGADE_ON_BACKEND(t.device(), sum_squares(t.contiguous()));
  }
  return std::sqrt(total);
}

}  // namespace brigade::kernels
