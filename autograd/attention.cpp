#include "autograd/attention.h"

#include <vector>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "kernels/kernels.h"
#include "tensor/error.h"

namespace brigade {

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                        const kernels::AttentionDropout& dropout) {
  // Autocast (autograd/autocast.h): attention reads bf16 q, k, v like a GEMM; the kernel keeps the softmax
  // statistics (max, sum, lse) in fp32 whatever the input dtype.
  const Tensor q = autograd::autocast_low(q_in);
  const Tensor k = autograd::autocast_low(k_in);
  const Tensor v = autograd::autocast_low(v_in);
  kernels::AttentionOutput fwd =
      autograd::forward_no_grad([&] { return kernels::causal_attention(q, k, v, scale, dropout); });
  return autograd::record(
      "causal_attention", fwd.out, {q, k, v},
      [q = autograd::saved(q), k = autograd::saved(k), v = autograd::saved(v), out = autograd::saved(fwd.out),
       lse = fwd.lse, scale, dropout](const Tensor& g, const NeedsGrad&) {
        kernels::AttentionGrads grads =
            kernels::causal_attention_backward(g, q, k, v, out, lse, scale, dropout);
        return std::vector<Tensor>{grads.dq, grads.dk, grads.dv};
      });
}

namespace {
/// The [B, H, T, D] view of part `part` (0 q, 1 k, 2 v) of a [B, T, 3, H, D] tensor.
Tensor head_part(const Tensor& packed5, int64_t part) {
  return packed5.permute({2, 0, 3, 1, 4}).select(0, part);
}
}  // namespace

Tensor causal_self_attention(const Tensor& qkv_in, int64_t heads, double scale,
                             const kernels::AttentionDropout& dropout) {
  const Tensor qkv = autograd::autocast_low(qkv_in);  // autocast: bf16 inputs, as causal_attention
  BRIGADE_CHECK_SHAPE(qkv.dim() == 3 && heads > 0 && qkv.size(2) % (3 * heads) == 0,
                      "causal_self_attention: expected qkv [B, T, 3C] with 3C divisible by 3 * heads (",
                      heads, "), found ", shape_str(qkv.shape()));
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / heads;
  const Shape packed{B, T, 3, heads, D};
  Tensor input = autograd::forward_no_grad([&] { return qkv.detach().contiguous().view(packed); });
  Tensor y = empty({B, T, C}, TensorOptions(qkv.dtype()).device(qkv.device()));
  const Tensor y_heads = y.view({B, T, heads, D}).permute({0, 2, 1, 3});  // [B, H, T, D] view of y
  Tensor lse =
      empty({B, heads, T}, TensorOptions(qkv.dtype() == kFloat64 ? kFloat64 : kFloat32).device(qkv.device()));
  autograd::forward_no_grad([&] {
    kernels::causal_attention_out(head_part(input, 0), head_part(input, 1), head_part(input, 2), scale,
                                  y_heads, lse, dropout);
    return 0;
  });
  return autograd::record("causal_self_attention", y, {qkv},
                          [input, out = y.detach(), lse, scale, heads, dropout, shape = qkv.shape()](
                              const Tensor& g, const NeedsGrad&) {
                            const int64_t B = shape[0], T = shape[1], C = shape[2] / 3, D = C / heads;
                            const Tensor y_heads = out.view({B, T, heads, D}).permute({0, 2, 1, 3});
                            const Tensor dout = g.contiguous().view({B, T, heads, D}).permute({0, 2, 1, 3});
                            Tensor grad = empty(shape, TensorOptions(g.dtype()).device(g.device()));
                            const Tensor grad5 = grad.view({B, T, 3, heads, D});
                            kernels::causal_attention_backward_out(
                                dout, head_part(input, 0), head_part(input, 1), head_part(input, 2), y_heads,
                                lse, scale, head_part(grad5, 0), head_part(grad5, 1), head_part(grad5, 2),
                                dropout);
                            return std::vector<Tensor>{grad};
                          });
}

}  // namespace brigade
