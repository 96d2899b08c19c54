// Backward of the tensor layer's views and copies (installed as detail::AutogradHooks by node.cpp).
// Internal to the autograd layer: users never call these; Tensor::view, permute, contiguous, to, ... do.
#pragma once

#include "tensor/tensor.h"

namespace brigade::autograd {

/// Makes `view` (a view of `input`, described by `info`) a non-leaf whose backward maps the gradient of
/// the view back to the input's shape.
void record_view(const Tensor& input, Tensor& view, const detail::ViewInfo& info);
/// Makes `output` (an element-for-element copy of `input`: contiguous(), clone(), to(device), to(dtype)) a
/// non-leaf whose backward converts the gradient back to the input's dtype and device.
void record_copy(const Tensor& input, Tensor& output);

}  // namespace brigade::autograd
