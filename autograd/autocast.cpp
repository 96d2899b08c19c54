// Autocast state and the two casts the ops apply. float64 is never touched (gradcheck runs in float64, and
// a float64 tensor inside an autocast scope is a deliberate choice, as in PyTorch's autocast).
#include "autograd/autocast.h"

#include "tensor/error.h"

namespace brigade::autograd {
namespace {
thread_local std::optional<DType> t_autocast;
}  // namespace

std::optional<DType> autocast_dtype() {
  return t_autocast;
}

AutocastGuard::AutocastGuard(std::optional<DType> dtype) : previous_(t_autocast) {
  BRIGADE_CHECK_DTYPE(!dtype || *dtype == kBFloat16,
                      "AutocastGuard: expected bfloat16 or no dtype (off), found ", dtype_name(*dtype));
  t_autocast = dtype;
}

AutocastGuard::~AutocastGuard() {
  t_autocast = previous_;
}

std::optional<DType> autocast_dtype_from_name(const std::string& name) {
  if (name == "fp32" || name == "float32") return std::nullopt;
  if (name == "bf16" || name == "bfloat16") return kBFloat16;
  BRIGADE_THROW(ValueError, "dtype '", name, "' is not a training dtype: expected fp32 or bf16");
}

Tensor autocast_low(const Tensor& x) {
  if (!t_autocast || !x.defined() || x.dtype() != kFloat32) return x;
  return x.to(*t_autocast);
}

Tensor autocast_fp32(const Tensor& x) {
  if (!t_autocast || !x.defined() || x.dtype() != kBFloat16) return x;
  return x.to(kFloat32);
}

std::pair<Tensor, Tensor> autocast_promote(const Tensor& a, const Tensor& b) {
  if (!t_autocast || !a.defined() || !b.defined() || a.dtype() == b.dtype()) return {a, b};
  return {autocast_fp32(a), autocast_fp32(b)};
}

}  // namespace brigade::autograd
