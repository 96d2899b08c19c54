// How a case's op is called: its operands (the case's inputs, then for a backward op the forward outputs it
// takes) and the call of the public op of kernels/kernels.h on them. The call is returned as a closure so
// that the perf mode (bench/kernels_bench.cpp) times the op alone, without the forward a backward case
// needs first.
#pragma once

#include <functional>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference/reference.h"
#include "tensor/tensor.h"
#include "tests/ops/op_case.h"

namespace brigade::testing {

/// Where a backward case's forward outputs come from: the reference, rounded to the dtypes the forward op
/// returns (tests: the op under test and the reference then see the same forward, so only the backward's
/// own error counts), or the forward kernel itself (the perf mode, where a reference would be too slow).
enum class ForwardFrom { Reference, Kernel };

/// The dtype of statistics the ops keep in float32 for float32 and bfloat16 inputs (layernorm's mean and
/// rstd, attention's lse, the loss).
inline DType stat_dtype(DType d) {
  return d == kFloat64 ? kFloat64 : kFloat32;
}

/// Input k of the case, or an undefined tensor when the case has no input k (optional layernorm params).
inline Tensor input_or_none(const std::vector<Tensor>& x, size_t k) {
  return k < x.size() ? x[k] : Tensor();
}

/// LayerNorm's inputs are x then (when the case has them) weight and bias; LayerNormBackward's are x, dy,
/// then weight; AddLayerNorm's x, residual, then weight and bias.
inline Tensor layernorm_weight(const OpCase& c, const std::vector<Tensor>& x) {
  return c.has_weight ? x.at(c.op == Op::LayerNorm ? 1 : 2) : Tensor();
}
inline Tensor layernorm_bias(const OpCase& c, const std::vector<Tensor>& x) {
  const size_t first_param = c.op == Op::AddLayerNorm ? 2 : 1;
  return c.has_bias ? x.at(first_param + (c.has_weight ? 1 : 0)) : Tensor();
}

/// AdamWAll's entries: the operands in fours (param, grad, m, v). Entry e takes the case's step with its
/// lr times (e + 1) and, for odd e, no weight decay: several groups' hyperparameters in one call.
inline std::vector<kernels::AdamWTensors> adamw_entries(const OpCase& c, const std::vector<Tensor>& x) {
  std::vector<kernels::AdamWTensors> entries;
  for (size_t k = 0; k + 4 <= x.size(); k += 4) {
    kernels::AdamWStep s = c.adamw;
    const size_t e = k / 4;
    s.lr *= static_cast<double>(e + 1);
    if (e % 2 == 1) s.weight_decay = 0.0;
    entries.push_back({x[k], x[k + 1], x[k + 2], x[k + 3], s});
  }
  return entries;
}

/// The forward outputs a backward case's op takes, on the inputs' device (empty for other ops):
///   UnaryBackward y; (Log)SoftmaxBackward y; LayerNormBackward mean, rstd; AttentionBackward out, lse.
inline std::vector<Tensor> forward_outputs(const OpCase& c, const std::vector<Tensor>& x, ForwardFrom from) {
  namespace k = brigade::kernels;
  namespace ref = brigade::kernels::reference;
  const bool kernel = from == ForwardFrom::Kernel;
  const Device device = x.empty() ? Device::cpu() : x[0].device();
  auto as_op_output = [&](const Tensor& t, DType dtype) { return t.to(dtype).to(device); };
  switch (c.op) {
    case Op::UnaryBackward:
      return {kernel ? k::unary(c.unary_op, x[0]) : as_op_output(ref::unary(c.unary_op, x[0]), c.dtype)};
    case Op::SoftmaxBackward:
      return {kernel ? k::softmax(x[0]) : as_op_output(ref::softmax(x[0]), c.dtype)};
    case Op::LogSoftmaxBackward:
      return {kernel ? k::log_softmax(x[0]) : as_op_output(ref::log_softmax(x[0]), c.dtype)};
    case Op::LayerNormBackward: {
      const Tensor w = layernorm_weight(c, x);
      if (kernel) {
        k::LayerNormOutput f = k::layernorm(x[0], w, Tensor(), c.scalar);
        return {f.mean, f.rstd};
      }
      k::LayerNormOutput f = ref::layernorm(x[0], w, Tensor(), c.scalar);
      return {as_op_output(f.mean, stat_dtype(c.dtype)), as_op_output(f.rstd, stat_dtype(c.dtype))};
    }
    case Op::AttentionBackward: {
      k::AttentionOutput f = kernel ? k::causal_attention(x[0], x[1], x[2], c.scalar)
                                    : ref::causal_attention(x[0], x[1], x[2], c.scalar);
      if (kernel) return {f.out, f.lse};
      return {as_op_output(f.out, c.dtype), as_op_output(f.lse, stat_dtype(c.dtype))};
    }
    default:
      return {};
  }
}

/// The case's operands: its inputs, then forward_outputs().
inline std::vector<Tensor> operands_of(const OpCase& c, const std::vector<Tensor>& x, ForwardFrom from) {
  std::vector<Tensor> operands = x;
  for (Tensor& t : forward_outputs(c, x, from)) operands.push_back(std::move(t));
  return operands;
}

/// A call of the op under test; returns what to compare (in-place ops: the tensors they wrote).
using OpCall = std::function<std::vector<Tensor>()>;

/// The public op of kernels.h on the operands (on `device`), as a call; `c` must outlive it (the table's
/// cases do). Composite cases have no kernel call (an empty function).
inline OpCall kernel_call(const OpCase& c, const std::vector<Tensor>& x, const Device& device) {
  namespace k = brigade::kernels;
  const OpCase* p = &c;  // the table outlives every call
  switch (c.op) {
    case Op::Unary:
      return [p, x] { return std::vector<Tensor>{k::unary(p->unary_op, x[0])}; };
    case Op::UnaryBackward:  // x, dy, y
      return [p, x] { return std::vector<Tensor>{k::unary_backward(p->unary_op, x[1], x[0], x[2])}; };
    case Op::Binary:
      return [p, x] { return std::vector<Tensor>{k::binary(p->binary_op, x[0], x[1])}; };
    case Op::BinaryScalar:
      return [p, x] { return std::vector<Tensor>{k::binary(p->binary_op, x[0], p->scalar)}; };
    case Op::ScalarBinary:
      return [p, x] { return std::vector<Tensor>{k::binary(p->binary_op, p->scalar, x[0])}; };
    case Op::AddInPlace:
      return [x] {
        k::add_(x[0], x[1]);
        return std::vector<Tensor>{x[0]};
      };
    case Op::MulInPlace:
      return [p, x] {
        k::mul_(x[0], p->scalar);
        return std::vector<Tensor>{x[0]};
      };
    case Op::Where:
      return [x] { return std::vector<Tensor>{k::where(x[0], x[1], x[2])}; };
    case Op::MaskedFill:
      return [p, x] { return std::vector<Tensor>{k::masked_fill(x[0], x[1], p->scalar)}; };
    case Op::Sum:
      return [p, x] { return std::vector<Tensor>{k::sum(x[0], p->dims, p->keepdim)}; };
    case Op::Mean:
      return [p, x] { return std::vector<Tensor>{k::mean(x[0], p->dims, p->keepdim)}; };
    case Op::Max:
      return [p, x] { return std::vector<Tensor>{k::max(x[0], p->dims, p->keepdim)}; };
    case Op::ArgMax:
      return [p, x] { return std::vector<Tensor>{k::argmax(x[0], p->dims.at(0), p->keepdim)}; };
    case Op::SumTo:
      return [p, x] { return std::vector<Tensor>{k::sum_to(x[0], p->shape)}; };
    case Op::Matmul:
      return [p, x] { return std::vector<Tensor>{k::matmul(x[0], x[1], p->transpose_a, p->transpose_b)}; };
    case Op::MatmulBias:  // a, b, bias
      return [p, x] {
        return std::vector<Tensor>{k::matmul_bias(x[0], x[1], x[2], p->transpose_a, p->transpose_b)};
      };
    case Op::Softmax:
      return [x] { return std::vector<Tensor>{k::softmax(x[0])}; };
    case Op::LogSoftmax:
      return [x] { return std::vector<Tensor>{k::log_softmax(x[0])}; };
    case Op::SoftmaxBackward:  // x, dy, y
      return [x] { return std::vector<Tensor>{k::softmax_backward(x[1], x[2])}; };
    case Op::LogSoftmaxBackward:
      return [x] { return std::vector<Tensor>{k::log_softmax_backward(x[1], x[2])}; };
    case Op::LayerNorm:
      return [p, x] {
        k::LayerNormOutput f = k::layernorm(x[0], layernorm_weight(*p, x), layernorm_bias(*p, x), p->scalar);
        return std::vector<Tensor>{f.y, f.mean, f.rstd};
      };
    case Op::LayerNormBackward:  // x, dy, [weight], mean, rstd
      return [p, x] {
        const size_t stats = x.size() - 2;
        k::LayerNormGrads g =
            k::layernorm_backward(x[1], x[0], layernorm_weight(*p, x), x[stats], x[stats + 1], p->has_bias);
        std::vector<Tensor> out = {g.dx};
        if (p->has_weight) out.push_back(g.dweight);
        if (p->has_bias) out.push_back(g.dbias);
        return out;
      };
    case Op::Attention:
      return [p, x] {
        k::AttentionOutput f = k::causal_attention(x[0], x[1], x[2], p->scalar);
        return std::vector<Tensor>{f.out, f.lse};
      };
    case Op::AttentionBackward:  // q, k, v, dout, out, lse
      return [p, x] {
        k::AttentionGrads g = k::causal_attention_backward(x[3], x[0], x[1], x[2], x[4], x[5], p->scalar);
        return std::vector<Tensor>{g.dq, g.dk, g.dv};
      };
    case Op::Embedding:
      return [x] { return std::vector<Tensor>{k::embedding(x[0], x[1])}; };
    case Op::EmbeddingBackward:
      return [p, x] { return std::vector<Tensor>{k::embedding_backward(x[0], x[1], p->index)}; };
    case Op::CrossEntropy:
      return [p, x] {
        k::CrossEntropyOutput r = k::cross_entropy(x[0], x[1], p->index, p->compute_grad);
        std::vector<Tensor> out = {r.loss, from_vector<int64_t>({r.count}, {})};
        if (p->compute_grad) out.push_back(r.grad_logits);
        return out;
      };
    case Op::Dropout:
      return [p, x] { return std::vector<Tensor>{k::dropout(x[0], p->scalar, p->rng)}; };
    case Op::CausalMask:
      return [p, device] {
        return std::vector<Tensor>{k::causal_mask(p->index, TensorOptions().dtype(p->dtype).device(device))};
      };
    case Op::AdamW:
      return [p, x] {
        k::adamw_update(x[0], x[1], x[2], x[3], p->adamw);
        return std::vector<Tensor>{x[0], x[2], x[3]};
      };
    case Op::GlobalL2Norm:
      return [x] { return std::vector<Tensor>{from_vector<double>({k::global_l2_norm(x)}, {})}; };
    case Op::BiasGelu:
      return [x] { return std::vector<Tensor>{k::bias_gelu(x[0], x[1])}; };
    case Op::BiasGeluBackward:  // x, dy, bias
      return [x] {
        k::BiasGeluGrads g = k::bias_gelu_backward(x[1], x[0], x[2]);
        return std::vector<Tensor>{g.dx, g.dbias};
      };
    case Op::AddLayerNorm:
      return [p, x] {
        k::AddLayerNormOutput f =
            k::add_layernorm(x[0], x[1], layernorm_weight(*p, x), layernorm_bias(*p, x), p->scalar);
        return std::vector<Tensor>{f.sum, f.norm.y, f.norm.mean, f.norm.rstd};
      };
    case Op::AdamWAll:
      return [p, x] {
        k::adamw_update_all(adamw_entries(*p, x));
        std::vector<Tensor> out;
        for (size_t i = 0; i < x.size(); ++i) {
          if (i % 4 != 1) out.push_back(x[i]);  // param, m, v of each entry
        }
        return out;
      };
    case Op::Composite:
      return {};
  }
  return {};
}

}  // namespace brigade::testing
