#include "nn/block.h"

#include "autograd/autocast.h"
#include "autograd/ops.h"

namespace brigade::nn {

MLP::MLP(int64_t embd, double dropout, bool bias, Generator* generator) : Module("MLP") {
  fc_ = register_module("fc", std::make_shared<Linear>(embd, 4 * embd, bias, generator));
  act_ = register_module("act", std::make_shared<GELU>());
  proj_ = register_module("proj", std::make_shared<Linear>(4 * embd, embd, bias, generator));
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout));
}

Tensor MLP::forward(const Tensor& x) {
  // fc's bias and the GELU as one op (bias_gelu: one pass forward, one backward, the bits of the two ops);
  // under autocast the bias joins the bf16 product in bf16, as Linear::forward adds it.
  Tensor h = fc_->has_bias() ? bias_gelu(fc_->forward_without_bias(x), autograd::autocast_low(fc_->bias()))
                             : (*act_)((*fc_)(x));
  return (*drop_)((*proj_)(h));
}

Block::Block(int64_t embd, int64_t heads, double dropout, bool bias, Generator* generator) : Module("Block") {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(embd, 1e-5, bias));
  attn_ =
      register_module("attn", std::make_shared<CausalSelfAttention>(embd, heads, dropout, bias, generator));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(embd, 1e-5, bias));
  mlp_ = register_module("mlp", std::make_shared<MLP>(embd, dropout, bias, generator));
}

Tensor Block::forward(const Tensor& x) {
  // The first residual add and ln2 in one pass (add_layer_norm: the bits of the add, then the norm).
  AddLayerNorm h = add_layer_norm(x, (*attn_)((*ln1_)(x)), ln2_->weight(), ln2_->bias(), ln2_->eps());
  return h.sum + (*mlp_)(h.norm);
}

}  // namespace brigade::nn
