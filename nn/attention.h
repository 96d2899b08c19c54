// Causal multi-head self-attention (GPT-2's).
//
//   x [B, T, C] --qkv--> [B, T, 3C] --split heads--> q, k, v [B*H, T, D]   (D = C / H)
//   scores = (q / sqrt(D)) k^T  [B*H, T, T], -inf above the diagonal (a query sees itself and the past)
//   att = dropout(softmax(scores));  y = att v  [B*H, T, D] --merge heads--> [B, T, C] --proj--> dropout
//
// Without attention dropout (p == 0, or eval mode) this is one fused op on the projection
// (causal_self_attention, autograd/attention.h): q, k, v are read in place, the heads come out merged, and
// no [T, T] matrix is made or kept. With dropout the
// weights themselves are needed: the heads are split with one copy per q/k/v (a batched GEMM needs one
// batch stride) and the scores go through matmul, masked_fill, softmax, dropout, matmul (k^T is never
// materialised: matmul's transpose flag).
#pragma once

#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "nn/module.h"

namespace brigade::nn {

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
  int64_t embd_, heads_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<Dropout> attn_drop_, resid_drop_;
};

}  // namespace brigade::nn
