// The v1 launchers of the CUDA ops whose later versions live in other files: what the CUDA *_with functions
// (kernels/<op>_versions.h) run for v1 and fall back to when a later version does not take an input.
// Internal to the CUDA backend; defined beside their kernels. Arguments and preconditions as the backend
// functions of the same name in kernels/backend.h.
#pragma once

#include "kernels/backend.h"

namespace brigade::kernels::cuda {

// softmax v1 (kernels/cuda/softmax.cu)
void softmax_rows_v1(const Tensor& x, const Tensor& out, bool log);
void softmax_backward_rows_v1(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log);

// layernorm v1 (kernels/cuda/layernorm.cu)
void layernorm_forward_v1(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const Tensor& y, const Tensor& mean, const Tensor& rstd);
void layernorm_backward_v1(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

// causal attention v1 (kernels/cuda/attention.cu)
void causal_attention_forward_v1(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const Tensor& out, const Tensor& lse);
void causal_attention_backward_v1(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                                  const Tensor& dk, const Tensor& dv);

// elementwise v1 (kernels/cuda/elementwise.cu)
void unary_v1(UnaryOp op, const Tensor& x, const Tensor& out);
void unary_backward_v1(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& out);
void binary_v1(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void binary_scalar_v1(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out);

}  // namespace brigade::kernels::cuda
