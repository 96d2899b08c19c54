// The transformer block (pre-norm, as GPT-2) and its MLP.
//
//   MLP:    x [B, T, C] -> fc [4C] -> GELU -> proj [C] -> dropout
//   Block:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))
#pragma once

#include <cstdint>
#include <memory>

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace brigade::nn {

class MLP : public Module {
 public:
  MLP(int64_t embd, double dropout = 0.0, bool bias = true, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  const std::shared_ptr<Linear>& fc() const { return fc_; }
  const std::shared_ptr<Linear>& proj() const { return proj_; }

 private:
  std::shared_ptr<Linear> fc_, proj_;
  std::shared_ptr<GELU> act_;
  std::shared_ptr<Dropout> drop_;
};

class Block : public Module {
 public:
  Block(int64_t embd, int64_t heads, double dropout = 0.0, bool bias = true, Generator* generator = nullptr);
  /// x [B, T, C] -> [B, T, C].
  Tensor forward(const Tensor& x) override;

  const std::shared_ptr<CausalSelfAttention>& attn() const { return attn_; }
  const std::shared_ptr<MLP>& mlp() const { return mlp_; }

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace brigade::nn
