#include "autograd/attention.h"

#include <vector>

#include "autograd/node.h"
#include "kernels/kernels.h"

namespace brigade {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  kernels::AttentionOutput fwd =
      autograd::forward_no_grad([&] { return kernels::causal_attention(q, k, v, scale); });
  return autograd::record(
      "causal_attention", fwd.out, {q, k, v},
      [q = autograd::saved(q), k = autograd::saved(k), v = autograd::saved(v), out = autograd::saved(fwd.out),
       lse = fwd.lse, scale](const Tensor& g, const NeedsGrad&) {
        kernels::AttentionGrads grads = kernels::causal_attention_backward(g, q, k, v, out, lse, scale);
        return std::vector<Tensor>{grads.dq, grads.dk, grads.dv};
      });
}

}  // namespace brigade
