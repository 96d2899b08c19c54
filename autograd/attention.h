// Fused causal self-attention as a differentiable op (kernels::causal_attention forward and backward).
//
//   out = softmax(scale * q k^T, keys j <= i only) v        q, k, v, out [B, H, T, D]
//
// It saves q, k, v, out and the [B, H, T] log-sum-exp of the scores: O(T D) per head, never a [T, T]
// matrix; backward recomputes the probabilities. q, k and v may be strided views (a GPT's head split of
// one qkv projection) and are read in place when their last dim is unit-stride.
//
// \code
//   Tensor y = brigade::causal_attention(q, k, v, 1.0 / std::sqrt(D));  // [B, H, T, D]
// \endcode
#pragma once

#include "tensor/tensor.h"

namespace brigade {

/// Causal scaled-dot-product attention over the T dim of q, k, v [B, H, T, D] (one floating dtype, one
/// device) -> [B, H, T, D]. Gradients flow to every input that requires grad.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);

}  // namespace brigade
