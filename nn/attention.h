// Causal multi-head self-attention (GPT-2's).
//
//   x [B, T, C] --qkv--> [B, T, 3C] --split heads--> q, k, v [B*H, T, D]   (D = C / H)
//   scores = (q / sqrt(D)) k^T  [B*H, T, T], -inf above the diagonal (a query sees itself and the past)
//   att = dropout(softmax(scores));  y = att v  [B*H, T, D] --merge heads--> [B, T, C] --proj--> dropout
//
// This is one fused op on the projection (causal_self_attention, autograd/attention.h): q, k, v are read
// in place, the heads come out merged, and no [T, T] matrix is made or kept. Dropout on the weights is
// inside the fused op where the device's attention kernel has it (the CPU's): one draw of the generator,
// the mask regenerated in the backward. Elsewhere (CUDA) dropout needs the weights themselves: the heads
// are split with one copy per q/k/v (a batched GEMM needs one batch stride) and the scores go through
// matmul, masked_fill, softmax, dropout, matmul (k^T is never materialised: matmul's transpose flag). Both
// paths draw the generator once and drop the same weights (kernels/attention_dropout.h).
//
// Recomputing the attention core (Megatron's "selective" recomputation). Under a RecomputeAttentionCore
// guard, with grad on, the core -- from the qkv projection's output to the heads-merged result, i.e. the
// fused op, or scores, softmax, dropout and the product with v -- runs inside autograd::checkpoint: it keeps
// only its input (qkv) and recomputes the rest when its gradient arrives, or earlier through
// autograd::recompute_graph_ahead (a pipeline stage's R action). With dropout it frees the [B*H, T, T]
// probabilities and mask; on the fused path only what the fused op saves beside qkv (its log-sum-exp rows).
// The guard is per thread, so a pipeline stage can turn it on for one layer while other stages run theirs.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "nn/module.h"

namespace brigade::nn {

/// While alive, CausalSelfAttention::forward on this thread recomputes its core (see above).
class RecomputeAttentionCore {
 public:
  explicit RecomputeAttentionCore(bool enabled = true);
  ~RecomputeAttentionCore();
  RecomputeAttentionCore(const RecomputeAttentionCore&) = delete;
  RecomputeAttentionCore& operator=(const RecomputeAttentionCore&) = delete;
  /// Whether a guard is on for this thread.
  static bool enabled();

 private:
  bool previous_;
};

class CausalSelfAttention : public Module {
 public:
  /// @param embd C; must be divisible by heads.
  /// @param dropout probability for the attention weights and for the output (residual) dropout.
  /// @param bias whether qkv and proj have biases.
  CausalSelfAttention(int64_t embd, int64_t heads, double dropout = 0.0, bool bias = true,
                      Generator* generator = nullptr);
  /// x [B, T, C] -> [B, T, C].
  Tensor forward(const Tensor& x) override;

  int64_t heads() const { return heads_; }
  const std::shared_ptr<Linear>& qkv() const { return qkv_; }
  const std::shared_ptr<Linear>& proj() const { return proj_; }

 private:
  /// qkv [B, T, 3C] -> y [B, T, C]: everything between the two projections.
  Tensor core(const Tensor& qkv);

  int64_t embd_, heads_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<Dropout> attn_drop_, resid_drop_;
};

}  // namespace brigade::nn
