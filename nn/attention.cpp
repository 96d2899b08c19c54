#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/attention.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "kernels/attention_versions.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, double dropout, bool bias,
                                         Generator* generator)
    : Module("CausalSelfAttention"), embd_(embd), heads_(heads) {
  BRIGADE_CHECK_VALUE(embd > 0 && heads > 0 && embd % heads == 0, "CausalSelfAttention: heads (", heads,
                      ") must be positive and divide embd (", embd, ")");
  qkv_ = register_module("qkv", std::make_shared<Linear>(embd, 3 * embd, bias, generator));
  proj_ = register_module("proj", std::make_shared<Linear>(embd, embd, bias, generator));
  attn_drop_ = register_module("attn_drop", std::make_shared<Dropout>(dropout));
  resid_drop_ = register_module("resid_drop", std::make_shared<Dropout>(dropout));
}

namespace {
thread_local bool recompute_attention_core = false;
}  // namespace

RecomputeAttentionCore::RecomputeAttentionCore(bool enabled) : previous_(recompute_attention_core) {
  recompute_attention_core = enabled;
}
RecomputeAttentionCore::~RecomputeAttentionCore() {
  recompute_attention_core = previous_;
}
bool RecomputeAttentionCore::enabled() {
  return recompute_attention_core;
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  BRIGADE_CHECK_SHAPE(x.dim() == 3 && x.size(2) == embd_, "CausalSelfAttention: expected input [B, T, ",
                      embd_, "], found ", shape_str(x.shape()));
  Tensor qkv = (*qkv_)(x);  // [B, T, 3C], laid out as [B, T, 3, H, D]
  Tensor y;                 // [B, T, C], heads merged
  if (RecomputeAttentionCore::enabled() && GradMode::is_enabled()) {
    // The replay must not itself checkpoint: it runs with the guard off, on whatever thread replays it.
    auto fn = [this](const std::vector<Tensor>& in) {
      RecomputeAttentionCore off(false);
      return std::vector<Tensor>{core(in[0])};
    };
    y = autograd::checkpoint(fn, {qkv}, attn_drop_->generator())[0];
  } else {
    y = core(qkv);
  }
  return (*resid_drop_)((*proj_)(y));
}

Tensor CausalSelfAttention::core(const Tensor& qkv) {
  const int64_t B = qkv.size(0), T = qkv.size(1), H = heads_, D = embd_ / heads_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double p = attn_drop_->is_training() ? attn_drop_->p() : 0.0;
  const kernels::AttentionKernel kernel =
      kernels::default_attention_kernel(qkv.device().kind, qkv.dtype(), D);
  if (p == 0.0 || kernels::attention_kernel_supports_dropout(kernel)) {
    // Fused: q, k, v read in place from the projection, the result written with the heads merged, no
    // [T, T] matrix made or kept, and the backward writes d(qkv) in one piece. The weights' dropout mask
    // is one draw of the generator, as the unfused dropout below would take.
    kernels::AttentionDropout dropout;
    if (p > 0.0) {
      Generator* generator = attn_drop_->generator();
      dropout = {p, (generator ? *generator : default_generator()).next_draw()};
    }
    return causal_self_attention(qkv, H, scale, dropout);
  }
  // Dropout on the attention weights where the kernel has none (CUDA) needs the weights: the unfused path.
  // [B, T, 3C] viewed as [B, T, 3, H, D], permuted to [3, B, H, T, D]: q, k, v are selects of it.
  Tensor heads = qkv.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
  // q is scaled by 1/sqrt(D) on its way to a contiguous layout (the multiply writes a fresh contiguous
  // tensor, so this costs no extra pass, whereas scaling the [B*H, T, T] scores would).
  Tensor q = (heads.select(0, 0) * scale).view({B * H, T, D});
  Tensor k = heads.select(0, 1).reshape({B * H, T, D});
  Tensor v = heads.select(0, 2).reshape({B * H, T, D});
  // Built per call (a T x T fill, small next to the GEMMs) rather than cached, so that one module can
  // run on several threads at once.
  const Tensor mask = kernels::causal_mask(T, TensorOptions(kFloat32).device(qkv.device()));
  Tensor scores = matmul(q, k, false, true);  // [B*H, T, T], already divided by sqrt(D)
  scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  Tensor att = (*attn_drop_)(softmax(scores));
  // [B*H, T, D] -> [B, H, T, D] -> [B, T, H, D] -> [B, T, C]
  return matmul(att, v).view({B, H, T, D}).permute({0, 2, 1, 3}).reshape({B, T, embd_});
}

}  // namespace brigade::nn
