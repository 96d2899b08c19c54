// Autocast: mixed precision without touching the model code (as torch.autocast).
//
// Inside an AutocastGuard(kBFloat16) scope the differentiable ops of autograd/ops.h pick their own
// compute dtype; outside one, and with the guard given std::nullopt, every op computes in its inputs' dtype.
// The rules, per op family:
//
//   matmul (and so Linear)        inputs cast to bf16 -> bf16 result; the GEMM accumulates in fp32
//   softmax, log_softmax,         inputs cast to fp32 -> fp32 result: exponentials, row sums and the
//   layer_norm, cross_entropy     normalisation statistics are where bf16's 8-bit mantissa hurts
//   elementwise, reductions,      follow their inputs; a binary op whose two floating inputs differ
//   embedding, dropout, views     (bf16 + fp32: a residual add) computes in the wider one, fp32
//
// Casts go through the differentiable Tensor::to(dtype), so every gradient arrives back in the dtype of
// the tensor it belongs to: parameters stay fp32 ("master weights") and receive fp32 gradients, which is
// what the optimizer and the global gradient norm read. Backward itself never consults autocast: each
// backward formula runs in the dtypes its forward saved.
//
// The state is per thread (each pipeline stage thread sets the caller's; a checkpoint's recompute replays
// the state of its forward).
//
// \code
//   brigade::autograd::AutocastGuard autocast(brigade::kBFloat16);
//   brigade::Tensor loss = brigade::nn::GPT::loss(model.forward(x), y);  // bf16 GEMMs, fp32 loss
//   loss.backward();                                                     // fp32 parameter gradients
// \endcode
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace brigade::autograd {

/// The low-precision dtype of this thread's autocast scope, or nullopt when autocast is off.
std::optional<DType> autocast_dtype();

/// RAII: sets this thread's autocast dtype for its lifetime and restores the previous one after.
/// `dtype` is kBFloat16 or std::nullopt (off, e.g. a region that must stay fp32 inside an autocast scope);
/// anything else is a DTypeError.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<DType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> previous_;
};

/// The autocast dtype a `--dtype` name asks for: "fp32"/"float32" -> nullopt, "bf16"/"bfloat16" ->
/// kBFloat16; anything else is a ValueError listing the valid names.
std::optional<DType> autocast_dtype_from_name(const std::string& name);

// ---- used by the ops (autograd/ops.cpp) ------------------------------------------------------------------

/// x cast to the autocast dtype when autocast is on and x is floating; x itself otherwise.
Tensor autocast_low(const Tensor& x);
/// x cast to float32 when autocast is on and x is bf16; x itself otherwise.
Tensor autocast_fp32(const Tensor& x);
/// When autocast is on and one of a, b is bf16 and the other float32, the bf16 one cast to float32 (the
/// wider type, as type promotion would); a and b unchanged otherwise.
std::pair<Tensor, Tensor> autocast_promote(const Tensor& a, const Tensor& b);

}  // namespace brigade::autograd
