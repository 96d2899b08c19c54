// Dispatch of dropout (mask regenerated from a Philox state, never stored) and the causal mask.
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

Tensor dropout(const Tensor& x, double p, const GeneratorState& state) {
  NoGradGuard no_grad;
  const char* op = "dropout";
  detail::check_defined(op, "x", x);
  detail::check_floating(op, "x", x);
  BRIGADE_CHECK_VALUE(p >= 0.0 && p <= 1.0, op, ": p must lie in [0, 1], found ", p);
  // p == 1 drops everything; x * 0 / 0 would be NaN, so the result is zeros by definition.
  if (p == 1.0) return zeros(x.shape(), detail::output_options(x));
  Tensor out = empty(x.shape(), detail::output_options(x));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(x.device(), dropout(x, p, state, out));
  return out;
}

Tensor causal_mask(int64_t T, TensorOptions options) {
  const char* op = "causal_mask";
  BRIGADE_CHECK_VALUE(T >= 0, op, ": T must be >= 0, found ", T);
  BRIGADE_CHECK_DTYPE(!(options.dtype_ == kFloat64 && options.device_.is_cuda()), op,
                      ": float64 is CPU-only, found a float64 request on ", options.device_.str(),
                      " (use float32 or bfloat16 on CUDA)");
  check_device_exists(options.device_, op);
  Tensor out = empty({T, T}, TensorOptions().dtype(options.dtype_).device(options.device_));
  if (T > 0) BRIGADE_ON_BACKEND(out.device(), causal_mask(out));
  return out;
}

}  // namespace brigade::kernels
