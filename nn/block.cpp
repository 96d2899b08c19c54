#include "nn/block.h"

#include "autograd/ops.h"

namespace brigade::nn {

MLP::MLP(int64_t embd, double dropout, bool bias, Generator* generator) : Module("MLP") {
  fc_ = register_module("fc", std::make_shared<Linear>(embd, 4 * embd, bias, generator));
  act_ = register_module("act", std::make_shared<GELU>());
  proj_ = register_module("proj", std::make_shared<Linear>(4 * embd, embd, bias, generator));
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout));
}

Tensor MLP::forward(const Tensor& x) {
  return (*drop_)((*proj_)((*act_)((*fc_)(x))));
}

Block::Block(int64_t embd, int64_t heads, double dropout, bool bias, Generator* generator) : Module("Block") {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(embd, 1e-5, bias));
  attn_ =
      register_module("attn", std::make_shared<CausalSelfAttention>(embd, heads, dropout, bias, generator));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(embd, 1e-5, bias));
  mlp_ = register_module("mlp", std::make_shared<MLP>(embd, dropout, bias, generator));
}

Tensor Block::forward(const Tensor& x) {
  Tensor h = x + (*attn_)((*ln1_)(x));
  return h + (*mlp_)((*ln2_)(h));
}

}  // namespace brigade::nn
