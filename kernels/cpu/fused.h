// The CPU side of kernels.h's fused ops, called by kernels/fused.cpp once it has checked the inputs and
// made them contiguous. Each gives the bits of the unfused CPU ops it replaces (tests/kernels/
// fused_ops_test.cpp compares them bit for bit).
#pragma once

#include <vector>

#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace brigade::kernels::cpu {

/// y = gelu(x + bias): x, y [R, C] contiguous, bias [C] contiguous, one dtype (kernels/cpu/bias_gelu.cpp).
void bias_gelu_forward(const Tensor& x, const Tensor& bias, const Tensor& y);
/// dx = dy * gelu'(x + bias) and dbias = the column sums of dx (kernels/cpu/reduce.h's association): dy, x,
/// dx [R, C], bias, dbias [C], all contiguous, one dtype.
void bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias, const Tensor& dx,
                        const Tensor& dbias);
/// sum = x + residual, then layernorm_forward of sum, one row at a time (kernels/cpu/layernorm.cpp): x,
/// residual, sum, y [R, C] contiguous; the rest as layernorm_forward.
void add_layernorm_forward(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                           double eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                           const Tensor& rstd);
/// adamw on every entry, as one loop over a flat list of segments (kernels/cpu/optim.cpp). Each entry's
/// tensors are contiguous and satisfy what backend.h's adamw asks.
void adamw_all(const std::vector<AdamWTensors>& tensors);

}  // namespace brigade::kernels::cpu
