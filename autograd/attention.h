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
//   Tensor z = brigade::causal_self_attention(qkv, H, 1.0 / std::sqrt(D));  // qkv [B, T, 3C] -> [B, T, C]
//   // With dropout 0.1 on the weights, one draw of a generator (nn::CausalSelfAttention does this):
//   Tensor d = brigade::causal_self_attention(qkv, H, 1.0 / std::sqrt(D), {0.1, generator.next_draw()});
// \endcode
#pragma once

#include "kernels/attention_dropout.h"
#include "tensor/tensor.h"

namespace brigade {

/// Causal scaled-dot-product attention over the T dim of q, k, v [B, H, T, D] (one floating dtype, one
/// device) -> [B, H, T, D]. Gradients flow to every input that requires grad. With `dropout` (p > 0; CPU
/// tensors), the weights are dropped as softmax followed by dropout with that generator state would drop
/// them (kernels/attention_dropout.h); the state is fixed, so calling twice gives the same mask.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                        const kernels::AttentionDropout& dropout = {});

/// GPT's attention core on the packed projection: qkv [B, T, 3C], laid out as [B, T, 3, H, D] (q, k, v,
/// then heads; C = heads * D), -> [B, T, C] with the heads merged. The same numbers as causal_attention on
/// the head-split views followed by the merge, without their copies: the forward reads q, k, v in place
/// and writes the merged layout, the backward writes d(qkv) as one [B, T, 3C] tensor (no zero-filled
/// gradient per select, no sums of them, no permuted copy).
Tensor causal_self_attention(const Tensor& qkv, int64_t heads, double scale,
                             const kernels::AttentionDropout& dropout = {});

}  // namespace brigade
